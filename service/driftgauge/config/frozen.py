"""Frozen runtime objects built from the validated config models, or such a model itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo

import pydantic

from driftgauge.config.secrets import Secret
from driftgauge.config.values import Strict
from driftgauge.core.fields import NULL_KEY, FieldType, KeyType, RowHashName, TimestampPrecision


class Store(Protocol):
    """A configured store as every layer sees it; each kind adds its own settings.

    The kinds' own dataclasses (stores/*/kind.py) satisfy it.
    """

    @property
    def name(self) -> str:
        """The key of the store under `stores:`."""
        ...

    @property
    def kind(self) -> str:
        """The store kind's name (see driftgauge.stores.registry)."""
        ...

    @property
    def timeout(self) -> float:
        """Seconds any one call to the store may take."""
        ...

    @property
    def max_concurrent_queries(self) -> int | None:
        """At most this many queries at once on the store in one replica; None: no limit."""
        ...

    @property
    def parallel_scans(self) -> int:
        """Range queries a side's first pass over several days is split into (1: one)."""
        ...


@dataclass(frozen=True)
class Field:
    """One content field of a check, by canonical name and type."""

    name: str
    type: FieldType


@dataclass(frozen=True)
class Exclusion:
    """A rule that drops source rows on purpose, under a named reason."""

    reason: str
    where: str | None = None
    query: dict[str, Any] | None = None
    null_columns: tuple[str, ...] = ()
    """Rows where any of these columns is NULL match (the composite key's NULL_KEY rule)."""

    @property
    def in_sql(self) -> bool:
        """Return True when a SQL store evaluates this rule (a `where` or NULL columns)."""
        return self.where is not None or bool(self.null_columns)


@dataclass(frozen=True)
class KeyColumn:
    """One part of a composite key: its canonical name, this side's column and its type."""

    name: str
    column: str
    type: KeyType


def null_key_rule(parts: tuple[KeyColumn, ...]) -> Exclusion:
    """Return the rule excluding a source's rows with a NULL part in their composite key."""
    columns = tuple(p.column for p in parts)
    missing = [{"bool": {"must_not": [{"exists": {"field": c}}]}} for c in columns]
    return Exclusion(
        NULL_KEY,
        query={"bool": {"should": missing, "minimum_should_match": 1}},
        null_columns=columns,
    )


@dataclass(frozen=True)
class View:
    """One side of a check as its adapter needs it: where, which rows, which columns."""

    store: Store
    key_column: str
    time_column: str
    columns: tuple[str, ...]
    """This side's column for each of `fields`, in the same order."""
    fields: tuple[Field, ...]
    key_type: KeyType
    timezone: ZoneInfo
    query: str | None = None
    table: str | None = None
    index: str | None = None
    filter: dict[str, Any] | None = None
    exclusions: tuple[Exclusion, ...] = ()
    timestamp_precision: TimestampPrecision = "us"
    """Set from the check's `timestamp_precision`; `auto` is resolved by the preflight."""
    measures: tuple[str, ...] = ()
    """The check's measures by canonical name; each is one of `fields`."""
    measure_scale: int | None = None
    """Digits after the point of every measure value (stores summing scaled integers)."""
    row_hash: RowHashName = "md5"
    """The hash of each row encoding, the check's (negotiated from both sides' kinds)."""
    key_parts: tuple[KeyColumn, ...] = ()
    """A composite key's parts in key order (two or more); empty for a one-column key,
    which is `key_column` of `key_type`. With parts, those two are the first part's."""

    @property
    def composite(self) -> bool:
        """Return True when the key has two or more parts."""
        return len(self.key_parts) > 1

    @property
    def key_columns(self) -> tuple[str, ...]:
        """Return this side's column of each key part (one for a one-column key)."""
        if self.composite:
            return tuple(p.column for p in self.key_parts)
        return (self.key_column,)

    @property
    def key_types(self) -> tuple[KeyType, ...]:
        """Return the type of each key part (one for a one-column key)."""
        if self.composite:
            return tuple(p.type for p in self.key_parts)
        return (self.key_type,)

    @property
    def sql_rules(self) -> tuple[Exclusion, ...]:
        """Return the exclusions a SQL store evaluates, in rule order (first match wins)."""
        return tuple(ex for ex in self.exclusions if ex.in_sql)

    @property
    def measure_columns(self) -> tuple[str, ...]:
        """Return this side's column of each of `measures`, in the same order."""
        by_name = {f.name: col for col, f in zip(self.columns, self.fields, strict=True)}
        return tuple(by_name[name] for name in self.measures)

    @property
    def kind(self) -> str:
        """Return the kind of store this view lives in."""
        return self.store.kind


@dataclass(frozen=True)
class Tolerance:
    """What a bucket may differ by before it counts as drift."""

    missing_ratio: float = 0.0
    extra: int = 0
    mismatched: int = 0
    exclusion_rate: tuple[tuple[str, float], ...] = ()

    def exclusion_limit(self, reason: str) -> float | None:
        """Return the exclusion-rate limit for a reason, if one is set."""
        for name, limit in self.exclusion_rate:
            if name == reason:
                return limit
        return None


class Drilldown(Strict):
    """How the engine descends from days to keys."""

    # The config section itself (`checks.<name>.drilldown`): the file and the engine share it.
    leaf_rows: int = pydantic.Field(2000, ge=1, le=1_000_000)
    dense_ratio: float = pydantic.Field(0.2, gt=0, le=1)
    max_depth: int = pydantic.Field(4, ge=1, le=8)
    slot_first_pass_days: int = pydantic.Field(
        62,
        ge=0,
        le=3660,
        description="Windows of at most this many days get each day's slots from the first"
        " scan (0: never).",
    )


@dataclass(frozen=True)
class Schedule:
    """When a check runs: a recent window often, all history rarely."""

    recent_every: timedelta | None = timedelta(hours=1)
    recent_days: int = 7
    full_every: timedelta | None = None
    full_cron: str | None = None
    full_days: int = 400


@dataclass(frozen=True)
class Ledger:
    """How a check's sync job reports to the run ledger and how its windows are judged."""

    job: str
    summary_deadline: timedelta = timedelta(hours=6)
    """The job's summary for a day window is due this long after the window ends."""
    no_match_rate: float = 0.05
    settle: timedelta = timedelta(minutes=15)
    """Delay between a run closing and the reconciliation of its window."""


@dataclass(frozen=True)
class Canary:
    """A sentinel written with the sync job's identity and read back through the reader view."""

    store: Store
    """Where the sentinel is written, with the sync job's own credentials."""
    index: str
    document: dict[str, Any]
    marker: str = "driftgauge_canary"
    write: Literal["index", "update"] = "update"
    every: timedelta | None = None
    cron: str | None = None
    timeout: float = 30.0
    key_query: str | None = None


@dataclass(frozen=True)
class VocabularyField:
    """A field whose source values must all be matchable by the reader's filter."""

    name: str
    source_column: str
    reader_column: str
    accepted: tuple[str, ...]


MIN_HISTORY = 14
"""Default days of history the volume band needs: two weeks see each weekday twice."""


@dataclass(frozen=True)
class Volume:
    """The volume band: distinct keys per day against the trailing buckets' mean ± sigmas."""

    trailing: int = 30
    sigmas: float = 3.0
    min_history: int | None = None
    """Days of source history a day needs before it is judged; None: MIN_HISTORY or trailing."""

    @property
    def needed_history(self) -> int:
        """Return how many trailing days of source history a day needs to be judged."""
        if self.min_history is not None:
            return self.min_history
        return min(MIN_HISTORY, self.trailing)


@dataclass(frozen=True)
class Check:
    """One configured pair (source, reader view) and how to judge it."""

    name: str
    source: View
    reader: View
    fields: tuple[Field, ...]
    key_type: KeyType
    timezone: ZoneInfo
    settle: timedelta
    tolerance: Tolerance = field(default_factory=Tolerance)
    drilldown: Drilldown = field(default_factory=Drilldown)
    schedule: Schedule = field(default_factory=Schedule)
    description: str = ""
    ledger: Ledger | None = None
    canary: Canary | None = None
    vocabulary: tuple[VocabularyField, ...] = ()
    volume: Volume | None = None
    timestamp_precision: TimestampPrecision | Literal["auto"] = "auto"
    measures: tuple[str, ...] = ()
    """Fields whose exact totals every bucket carries per side (see View.measures)."""
    key_types: tuple[KeyType, ...] = ()
    """A composite key's part types in key order; empty for a one-column key (`key_type`)."""

    @property
    def row_hash(self) -> RowHashName:
        """Return the row hash both sides compute (the loader sets the same on both views)."""
        return self.source.row_hash


@dataclass(frozen=True)
class Retention:
    """How long the state database keeps results that nothing serves any more."""

    runs: timedelta = timedelta(days=30)
    """Finished reconciliation runs (the latest one judging each served day stays longer)."""
    ledger: timedelta = timedelta(days=400)
    """Run-ledger, canary and signals rows (rows the checks still read stay longer)."""


@dataclass(frozen=True)
class Lease:
    """How a replica keeps its runs owned: renew every `heartbeat`, lose them after `expires`."""

    heartbeat: timedelta = timedelta(seconds=15)
    expires: timedelta = timedelta(seconds=60)
    """A run whose heartbeat is older than this is marked `error: interrupted` by any replica."""


@dataclass(frozen=True)
class State:
    """Where driftgauge keeps its own results, and for how long."""

    dsn: Secret
    schema: str = "driftgauge"
    retention: Retention = field(default_factory=Retention)
    lease: Lease = field(default_factory=Lease)
    max_concurrent_runs: int = 16
    """Runs one replica makes at once (each holds a state connection for its check's lock)."""


@dataclass(frozen=True)
class Api:
    """REST API settings."""

    tokens: tuple[Secret, ...] = ()
    public_read: bool = True
    sample_keys: int = 100
    metrics_tokens: tuple[Secret, ...] = ()
    """Scrape-only tokens: they open /metrics and nothing else."""
    metrics_public: bool | None = None
    """Whether /metrics needs no token; None follows public_read."""
    live_concurrency: int = 4
    """Live drill-downs answered at once; more get a 429."""


@dataclass(frozen=True)
class Config:
    """The whole validated configuration."""

    stores: dict[str, Store]
    state: State
    api: Api
    checks: dict[str, Check]
