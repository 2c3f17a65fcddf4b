"""Turn result objects into state rows and back."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from driftgauge.core.aggregate import Aggregate
from driftgauge.core.errors import StateError
from driftgauge.engine.payloads import DriftKind
from driftgauge.engine.result import BucketResult, KeyDiff, Node, measures_text
from driftgauge.state.payloads import BucketOut, CheckRun, KeyOut

MAX_DIGEST = (1 << 64) - 1
SIDE_COLUMNS = (
    "source_count",
    "source_distinct",
    "source_digest",
    "reader_count",
    "reader_distinct",
    "reader_digest",
)
"""The columns of both sides' aggregates in a bucket or node row, as _side_args gives them."""
NODE_COLUMNS = (
    "run_id",
    "day",
    "seq",
    "parent_seq",
    "level",
    "label",
    "hour_start",
    "fetched",
    *SIDE_COLUMNS,
    "measures",
)
SAMPLE_COLUMNS = (
    "run_id",
    "day",
    "kind",
    "key",
    "key_hash",
    "source_copies",
    "reader_copies",
    "event_time",
)


# The runs table calls the check `check_name`; every other column is the field's name.
_RUN_COLUMN_NAMES = tuple("check_name" if f.name == "check" else f.name for f in fields(CheckRun))
RUN_COLUMNS = ", ".join(_RUN_COLUMN_NAMES)


@dataclass(frozen=True)
class StoredBucket:
    """A day bucket as stored, with the run it came from."""

    run_id: int
    finished_at: datetime | None
    bucket: BucketResult

    def payload(self) -> BucketOut:
        """Return the bucket and its run as the payload the API shows."""
        return BucketOut(
            **dict(self.bucket.payload()),
            run_id=self.run_id,
            checked_at=self.finished_at.isoformat() if self.finished_at else None,
        )


@dataclass(frozen=True)
class StoredKey:
    """One sampled differing key, with its key hash when known."""

    diff: KeyDiff
    key_hash: str | None

    def payload(self, composite: bool = False) -> KeyOut:
        """Return the key as the payload the API shows (a composite key as its parts)."""
        return KeyOut(**self.diff.payload(composite).model_dump(), key_hash=self.key_hash)

    def to_dict(self) -> dict[str, Any]:
        """Return the key as a JSON-ready dict."""
        return self.payload().model_dump()


def digest_param(value: int) -> Decimal:
    """Return a digest as an exact numeric parameter, refusing values outside 64 bits."""
    if not 0 <= value <= MAX_DIGEST:
        raise StateError(f"digest {value} is not an unsigned 64-bit value")
    return Decimal(value)


def run_row(rec: Mapping[str, Any]) -> CheckRun:
    """Return a run from a record of RUN_COLUMNS."""
    return CheckRun(*(rec[column] for column in _RUN_COLUMN_NAMES))


def bucket_row(run_id: int, bucket: BucketResult, tz: ZoneInfo | None) -> dict[str, Any]:
    """Return one bucket row by column (day is the bucket's local date)."""
    return {
        "run_id": run_id,
        "day": local_day(bucket.start, tz),
        "start_at": bucket.start,
        "status": bucket.status,
        "expected": bucket.expected,
        "visible": bucket.visible,
        "excluded": json.dumps(bucket.excluded),
        "ledger_excluded": json.dumps(bucket.ledger_excluded),
        "missing": bucket.missing,
        "extra": bucket.extra,
        "mismatched": bucket.mismatched,
        "duplicates": bucket.duplicates,
        **dict(zip(SIDE_COLUMNS, _side_args(bucket.source, bucket.reader), strict=True)),
        "reasons": json.dumps(bucket.reasons),
        "measures": measures_json(bucket.source, bucket.reader),
        "drift_hours": bucket.drift_hours,
        "strategy": bucket.strategy,
        "strategy_reason": bucket.strategy_reason,
    }


def _side_args(source: Aggregate, reader: Aggregate) -> tuple[Any, ...]:
    """Return the count, distinct and digest columns of both sides, source first."""
    return (
        source.count,
        source.distinct_keys,
        digest_param(source.digest),
        reader.count,
        reader.distinct_keys,
        digest_param(reader.digest),
    )


def _sides(rec: Mapping[str, Any]) -> tuple[Aggregate, Aggregate]:
    """Return both sides' aggregates from a record of bucket or node columns."""
    s_tot, r_tot = measures_from(rec.get("measures"))
    return (
        Aggregate(rec["source_count"], rec["source_distinct"], int(rec["source_digest"]), s_tot),
        Aggregate(rec["reader_count"], rec["reader_distinct"], int(rec["reader_digest"]), r_tot),
    )


def measures_json(source: Aggregate, reader: Aggregate) -> str | None:
    """Return both sides' measure totals as stored JSON (decimal text), None without any."""
    s, r = measures_text(source), measures_text(reader)
    if s is None and r is None:
        return None
    return json.dumps({"source": s or {}, "reader": r or {}})


def measures_from(raw: Any) -> tuple[dict[str, Decimal] | None, dict[str, Decimal] | None]:
    """Return (source, reader) totals from a stored measures column (NULL: none)."""
    if raw is None:
        return None, None
    data = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(data, dict):
        raise StateError("stored measure totals are not a JSON object")
    sides = []
    for side in ("source", "reader"):
        got = data.get(side)
        if not isinstance(got, dict):
            raise StateError(f"stored measure totals lack the {side} side")
        sides.append({str(k): Decimal(str(v)) for k, v in got.items()})
    return sides[0], sides[1]


def local_day(start: datetime, tz: ZoneInfo | None) -> date:
    """Return the bucket's local date: its start in the check's time zone."""
    return (start.astimezone(tz) if tz is not None else start).date()


def bucket_from(rec: Mapping[str, Any], tz: ZoneInfo | None = None) -> StoredBucket:
    """Return a StoredBucket from a bucket record joined with its run's finished_at."""
    start: datetime = rec["start_at"]
    source, reader = _sides(rec)
    bucket = BucketResult(
        start=start.astimezone(tz) if tz is not None else start,
        status=rec["status"],
        expected=rec["expected"],
        visible=rec["visible"],
        excluded=_json_map(rec["excluded"]),
        missing=rec["missing"],
        extra=rec["extra"],
        mismatched=rec["mismatched"],
        duplicates=rec["duplicates"],
        source=source,
        reader=reader,
        reasons=[str(x) for x in json.loads(rec["reasons"])],
        ledger_excluded=_json_map(rec["ledger_excluded"]),
        drift_hours=list(rec.get("drift_hours") or []),
        strategy=rec.get("strategy"),
        strategy_reason=rec.get("strategy_reason"),
    )
    return StoredBucket(rec["run_id"], rec.get("finished_at"), bucket)


def _json_map(text: str) -> dict[str, int]:
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise StateError("a stored exclusion map is not a JSON object")
    return {str(k): int(v) for k, v in raw.items()}


def node_records(run_id: int, day: date, tree: list[Node]) -> Iterator[tuple[Any, ...]]:
    """Yield one row per node of a bucket's tree, depth first, parents before children."""
    seq = 0

    def walk(
        nodes: list[Node], parent: int | None, hour: datetime | None
    ) -> Iterator[tuple[Any, ...]]:
        nonlocal seq
        for node in nodes:
            seq += 1
            mine = seq
            here = datetime.fromisoformat(node.label) if node.level == "hour" else hour
            yield (
                run_id,
                day,
                mine,
                parent,
                node.level,
                node.label,
                here,
                node.fetched,
                *_side_args(node.source, node.reader),
                measures_json(node.source, node.reader),
            )
            yield from walk(node.children, mine, here)

    yield from walk(tree, None, None)


def nodes_from(records: list[Mapping[str, Any]]) -> list[Node]:
    """Rebuild a forest from node records; a node whose parent is not among them is a root."""
    by_seq: dict[int, Node] = {}
    roots: list[Node] = []
    for rec in sorted(records, key=lambda r: r["seq"]):
        source, reader = _sides(rec)
        node = Node(
            level=rec["level"],
            label=rec["label"],
            source=source,
            reader=reader,
            fetched=rec["fetched"],
        )
        by_seq[rec["seq"]] = node
        parent = by_seq.get(rec["parent_seq"]) if rec["parent_seq"] is not None else None
        if parent is not None:
            parent.children.append(node)
        else:
            roots.append(node)
    return roots


def sample_records(
    run_id: int,
    day: date,
    samples: list[KeyDiff],
    per_kind: int | None,
    key_hash: Callable[[str], str | None] | None,
) -> Iterator[tuple[Any, ...]]:
    """Yield sample rows, at most `per_kind` keys of each kind."""
    taken: dict[DriftKind, int] = {}
    for diff in samples:
        if per_kind is not None and taken.get(diff.kind, 0) >= per_kind:
            continue
        taken[diff.kind] = taken.get(diff.kind, 0) + 1
        # Prefer the hash the store computed; fall back to recomputing it here.
        hashed = diff.key_hash
        if hashed is None and key_hash is not None and diff.key is not None:
            hashed = key_hash(diff.key)
        yield (
            run_id,
            day,
            diff.kind,
            diff.key,
            hashed,
            diff.source_copies,
            diff.reader_copies,
            diff.event_time,
        )


def stored_key(rec: Mapping[str, Any]) -> StoredKey:
    """Return a StoredKey from a key_samples record."""
    return StoredKey(
        KeyDiff(
            rec["key"], rec["kind"], rec["source_copies"], rec["reader_copies"], rec["event_time"]
        ),
        rec["key_hash"],
    )
