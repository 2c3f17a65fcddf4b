"""The reconciliation result tree: run → day bucket → hour → key prefix → keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from driftgauge.core.aggregate import Aggregate
from driftgauge.core.fields import RowHashName
from driftgauge.encoding.digest import shown_key
from driftgauge.engine.payloads import (
    AggregateOut,
    BucketResultOut,
    BucketStatus,
    DayStrategy,
    DriftKind,
    DrillKeyOut,
    NodeOut,
)

Status = BucketStatus
RunStatus = Literal["ok", "drift", "error", "nothing_judged"]
"""A run's status: its worst bucket, or nothing_judged when no bucket was judged at all
(every bucket settling, or none in the window): never ok without a judged bucket."""
DRIFT_KINDS: tuple[DriftKind, ...] = ("missing", "extra", "mismatched")
Out = TypeVar("Out", bound=BaseModel)


@dataclass
class KeyDiff:
    """One differing key and why it differs."""

    key: str | None
    """The key's text; None for a NULL key (never shown as "")."""
    kind: DriftKind
    source_copies: int
    reader_copies: int
    event_time: datetime | None = None
    key_hash: str | None = None
    """The key hash the stores computed, when the key came from a join."""

    def payload(self, composite: bool = False) -> DrillKeyOut:
        """Return the key as the payload the CLI and a live drill-down show (no key hash).

        A composite key's text (its JSON array) is shown as the array of its parts.
        """
        when = self.event_time.isoformat() if self.event_time else None
        # The key hash is not among the payload's fields, so it is left out.
        return by_name(DrillKeyOut, self, key=shown_key(self.key, composite), event_time=when)


@dataclass
class Node:
    """One drill-down node: an hour or a key-hash prefix, with both sides' aggregates."""

    level: Literal["hour", "prefix"]
    label: str
    """An hour's start (ISO 8601) or a hex prefix."""
    source: Aggregate
    reader: Aggregate
    children: list[Node] = field(default_factory=list)
    fetched: bool = False
    """True when this node's rows were fetched and joined (a leaf)."""

    @property
    def differs(self) -> bool:
        """Return True when the sides disagree, or either holds a key more than once."""
        return needs_drill(self.source, self.reader)

    def payload(self) -> NodeOut:
        """Return the node and its children as the payload the CLI and the API show."""
        return by_name(
            NodeOut,
            self,
            source=aggregate_out(self.source),
            reader=aggregate_out(self.reader),
            children=[c.payload() for c in self.children],
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the node as a JSON-ready dict."""
        return self.payload().model_dump()


@dataclass
class BucketResult:
    """The verdict for one day bucket."""

    start: datetime
    status: Status
    expected: int = 0
    visible: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    extra: int = 0
    mismatched: int = 0
    duplicates: int = 0
    """Keys with more than one copy on either side (each is also mismatched or extra)."""
    source: Aggregate = field(default_factory=Aggregate)
    reader: Aggregate = field(default_factory=Aggregate)
    reasons: list[str] = field(default_factory=list)
    """Why the status is what it is (tolerances crossed, errors)."""
    tree: list[Node] = field(default_factory=list)
    samples: list[KeyDiff] = field(default_factory=list)
    """A bounded sample of differing keys."""
    ledger_excluded: dict[str, int] = field(default_factory=dict)
    drift_hours: list[datetime] = field(default_factory=list)
    """A day judged from its difference digests (no tree): the start of each local hour
    holding a differing row, in UTC, so a repair can name exactly the hours to redo."""
    strategy: DayStrategy | None = None
    """How the day was judged (None: a stored run from before this was kept)."""
    strategy_reason: str | None = None
    """Why that strategy, in a sentence."""

    @property
    def drift(self) -> int:
        """Return missing + extra + mismatched."""
        return self.missing + self.extra + self.mismatched

    @property
    def excluded_total(self) -> int:
        """Return the number of excluded rows over all reasons."""
        return sum(self.excluded.values())

    def payload(self) -> BucketResultOut:
        """Return the bucket (without its tree) as the payload the CLI and the API show."""
        return by_name(
            BucketResultOut,
            self,
            day=self.start.date().isoformat(),
            start=self.start.isoformat(),
            source=aggregate_out(self.source),
            reader=aggregate_out(self.reader),
        )

    def to_dict(self, *, with_tree: bool = False) -> dict[str, Any]:
        """Return the bucket as a JSON-ready dict."""
        out = self.payload().model_dump()
        if with_tree:
            out["tree"] = [n.to_dict() for n in self.tree]
        return out


@dataclass
class RunResult:
    """A whole reconciliation of one check over one window."""

    check: str
    window_start: datetime
    window_end: datetime
    started_at: datetime
    finished_at: datetime | None = None
    buckets: list[BucketResult] = field(default_factory=list)
    error: str | None = None
    failed_store: str | None = None
    """The configured store whose call failed the run, when one did."""
    run_id: int | None = None
    """The run's id in the state database, once recorded there."""
    queries: int = 0
    """Store round trips made, both sides together."""
    rows_fetched: int = 0
    rows_scanned: int = 0
    """Rows the stores digested or returned for this run, both sides together."""
    source_seconds: float = 0.0
    """Time spent waiting on the source (calls overlap, so this can exceed the wall time)."""
    reader_seconds: float = 0.0
    row_hash: RowHashName = "md5"
    """The hash every row digest of this run was computed with (digests of another differ)."""
    first_pass: str | None = None
    """The planner's first-pass strategy in a few words (engine.strategy.FirstPass)."""

    @property
    def status(self) -> RunStatus:
        """Return the worst bucket status, error when the run failed, nothing_judged if no
        bucket was judged."""
        if self.error is not None:
            return "error"
        statuses = {b.status for b in self.buckets}
        if "error" in statuses:
            return "error"
        if "drift" in statuses:
            return "drift"
        return "ok" if "ok" in statuses else "nothing_judged"

    def to_dict(self, *, with_tree: bool = False) -> dict[str, Any]:
        """Return the run as a JSON-ready dict."""
        return {
            "check": self.check,
            "status": self.status,
            "window_start": self.window_start.isoformat(),
            "window_end": self.window_end.isoformat(),
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "error": self.error,
            "queries": self.queries,
            "rows_fetched": self.rows_fetched,
            "rows_scanned": self.rows_scanned,
            "source_seconds": round(self.source_seconds, 3),
            "reader_seconds": round(self.reader_seconds, 3),
            "row_hash": self.row_hash,
            "first_pass": self.first_pass,
            "buckets": [b.to_dict(with_tree=with_tree) for b in self.buckets],
        }


def by_name(model: type[Out], result: object, **shown: object) -> Out:
    """Return `model` filled from the result's attributes of the same names, `shown` overriding.

    Validation copies lists and dicts, so the payload never shares them with the result.
    """
    names = model.model_fields.keys() - shown.keys()
    return model.model_validate({**{n: getattr(result, n) for n in names}, **shown})


def needs_drill(source: Aggregate, reader: Aggregate) -> bool:
    """Return True when two aggregates differ or either side has duplicate keys."""
    return (not source.same_as(reader)) or source.has_duplicates or reader.has_duplicates


def aggregate_out(a: Aggregate) -> AggregateOut:
    """Return an aggregate as its payload."""
    # Digests are 64-bit unsigned; JSON readers lose precision above 2^53, so send hex.
    return AggregateOut(
        count=a.count,
        distinct_keys=a.distinct_keys,
        digest=f"{a.digest:016x}",
        measures=measures_text(a),
    )


def measures_text(a: Aggregate) -> dict[str, str] | None:
    """Return an aggregate's measure totals as plain decimal text (never an exponent)."""
    if a.measures is None:
        return None
    return {name: f"{total:f}" for name, total in sorted(a.measures.items())}


def sort_key(k: KeyDiff) -> tuple[bool, str]:
    """Order keys by their text, a NULL key first."""
    return (k.key is not None, k.key or "")
