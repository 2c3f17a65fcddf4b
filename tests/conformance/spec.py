"""What the suite asks a kind's fixtures for, in words no kind owns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, Protocol

import pytest

from driftgauge.stores import registry
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.registry import COMPOSITE_KEYS, SLOT_FIRST_PASS, VOCABULARY_COUNTER

__all__ = ["COMPOSITE_KEYS", "SLOT_FIRST_PASS", "VOCABULARY_COUNTER"]

ColumnType = Literal[
    "key", "text", "instant", "instant_ms", "naive_ms", "decimal", "integer", "boolean", "analyzed"
]
"""A column as the suite needs it stored; each kind picks its engine's type for it.

`instant` keeps microseconds, `instant_ms` and `naive_ms` (a time without zone, read as UTC)
keep milliseconds, `analyzed` is full-text (only declared, never filled)."""

# Capabilities a kind may lack; a test needing one is skipped with its name. A registered
# kind has those of its stores.registry entry (SLOT_FIRST_PASS, VOCABULARY_COUNTER, ...)
# and those its fixtures add.
ENGINE_ENCODING = "engine-side canonical encoding"
DOUBLE_DECIMALS = "decimals stored as doubles"
STORE_ERRORS = "store errors (unreachable store, missing relation)"
FIELD_ERRORS = "query errors naming an unusable field"
ROW_CHANGES = "changing stored rows"
DESCRIBES_FIELDS = "describing its fields (preflight)"
TIMEOUTS = "a store that stops answering (through a fault proxy of our own)"
READER_ONLY = "read only as a reader: nothing excluded, a NULL key part encodes as N"


def double_safe(value: str | None) -> bool:
    """Return True when a double holds the decimal exactly as its shortest repr."""
    if value is None:
        return True
    number = Decimal(value)
    return number.is_finite() and Decimal(repr(float(number))) == number


@dataclass(frozen=True)
class Rule:
    """A row predicate on one column: `null`, `eq` value or `ne` value."""

    name: str
    column: str
    op: Literal["null", "eq", "ne"]
    value: Any = None

    def matches(self, row: Mapping[str, Any]) -> bool:
        """Return True when the row satisfies the predicate (SQL semantics for NULL)."""
        got = row.get(self.column)
        if self.op == "null":
            return got is None
        if got is None:
            return False
        return bool(got == self.value) if self.op == "eq" else bool(got != self.value)


@dataclass(frozen=True, eq=False)
class Table:
    """Rows to store under a fresh name; `rows` hold a value per column, in order."""

    name: str
    """A short tag for the data set; the stored name is made unique from it."""
    columns: tuple[tuple[str, ColumnType], ...]
    rows: Sequence[tuple[Any, ...]]
    declared: tuple[tuple[str, ColumnType], ...] = ()
    """Columns the kind should declare but that hold no values (where the kind can)."""
    shards: int = 3
    time_index: str | None = None
    """A column to index for time-range scans (kinds that index everything ignore it)."""
    id_column: str | None = None
    """A column whose value names the row for changes (kinds with document ids use it)."""

    def dicts(self) -> list[dict[str, Any]]:
        """Return the rows as column → value mappings."""
        names = [n for n, _ in self.columns]
        return [dict(zip(names, row, strict=True)) for row in self.rows]


@dataclass(frozen=True)
class Spec:
    """Which rows of a source to read and how: a view in words no kind owns."""

    key: str | tuple[str, ...]
    """The key column, or a composite key's columns (a source's view: a NULL part excludes)."""
    time: str
    fields: Mapping[str, tuple[str, str]]
    """Canonical name → (this source's column, canonical type)."""
    key_type: str | tuple[str, ...] = "string"
    """The key's type; a composite key's: one for every part or one per part."""
    tz: str = "UTC"
    keep: Rule | None = None
    """Only rows matching this rule are in the view (a reader's filter or a source query)."""
    exclusions: tuple[Rule, ...] = ()
    precision: str = "us"
    relation: str | None = None
    """Read another relation of the store than the loaded one (for errors)."""

    def view_args(self) -> dict[str, Any]:
        """Return make_view's arguments for the key, time and fields (what every kind reads)."""
        return {
            "key": self.key,
            "time": self.time,
            "fields": dict(self.fields),
            "key_type": self.key_type,
            "tz": self.tz,
            "timestamp_precision": self.precision,
        }

    @classmethod
    def of_golden(cls, vector: Mapping[str, Any]) -> Spec:
        """Return the Spec of a golden vector's one row: key k, time t, fields c0, c1, ..."""
        return cls(
            key="k",
            time="t",
            key_type=vector["key_type"],
            fields={f"c{i}": (f"c{i}", f["type"]) for i, f in enumerate(vector["fields"])},
            precision=vector.get("precision", "us"),
        )


class Source(Protocol):
    """A table as stored by one kind."""

    table: Table

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return an adapter reading the stored rows as `spec` says."""
        ...

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Replace the rows whose id column is `row_id` by `rows` (visible at once)."""
        ...

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """Return an adapter with `store_timeout` reaching the store through a fault proxy."""
        ...

    async def drop(self) -> None:
        """Remove everything this source created."""
        ...


class Hung(Protocol):
    """An adapter reaching its store through a proxy of our own that can stop answering."""

    adapter: StoreAdapter

    def hang(self) -> None:
        """From now on, the store's answers never arrive."""
        ...

    async def close(self) -> None:
        """Stop the proxy (dropping what it holds) and close the adapter."""
        ...


class Golden(Protocol):
    """One stored row per golden vector."""

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return an adapter seeing only vector n's row (decimals as doubles when asked)."""
        ...

    async def encoding(self, n: int) -> str:
        """Return the canonical encoding the engine itself computes for vector n's row."""
        ...

    async def drop(self) -> None:
        """Remove everything this set created."""
        ...


@dataclass(frozen=True)
class Failures:
    """How a kind reports a store it cannot reach or a relation that is not there."""

    unreachable_match: str
    """What the error of `Fixtures.open_unreachable` (or its first query) matches."""
    missing_match: tuple[str, str]
    """Patterns the aggregate error and the row-export error each match."""
    missing_relation: str = "no_such_table"
    """A relation the store does not hold, read through `Spec.relation`."""
    unusable_field: str = "label_text"
    """A declared column a query must refuse, named in the error (the items' analyzed text)."""
    timeout_match: str = "no answer within the timeout"


class Fixtures(Protocol):
    """Everything the suite needs from one kind, on its real engine."""

    capabilities: frozenset[str]
    failures: Failures | None

    async def load(self, table: Table) -> Source:
        """Store the table under a fresh name and return it."""
        ...

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> Golden:
        """Store one row per golden vector, each with event time `at`."""
        ...

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Return (or fail opening) an adapter on a store nothing listens at."""
        ...


@dataclass(frozen=True)
class Kind:
    """One row of the kinds table: a store kind and its fixtures."""

    name: str
    fixtures: Fixtures
    registered: bool = True
    """False for the in-memory fake, which no config can name (it has no registry entry)."""

    @property
    def capabilities(self) -> frozenset[str]:
        """Return the registry entry's capabilities and those the fixtures add."""
        entry = registry.kind_of(self.name).capabilities if self.registered else frozenset()
        return entry | self.fixtures.capabilities

    def has(self, capability: str) -> bool:
        """Return True when the kind has a capability."""
        return capability in self.capabilities

    def require(self, capability: str) -> None:
        """Skip the calling test, naming the capability, unless the kind has it."""
        if not self.has(capability):
            pytest.skip(f"{self.name} lacks the capability: {capability}")


Store = Callable[[Kind, Table], Awaitable[Source]]
"""Store a table in a kind once per test session and return it."""
