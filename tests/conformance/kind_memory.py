"""The in-memory fake's fixtures: rows hashed by the Python reference, read by MemoryAdapter.

The fake is the oracle of the engine's unit tests, so it must answer as the real kinds do.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

from driftgauge.core.fields import NULL_KEY
from driftgauge.encoding import digest as d
from driftgauge.stores.base import RowHash, StoreAdapter
from driftgauge.stores.memory import MemoryAdapter
from tests.conformance.spec import (
    COMPOSITE_KEYS,
    ROW_CHANGES,
    SLOT_FIRST_PASS,
    Failures,
    Hung,
    Spec,
    Table,
)

_HASHED: dict[tuple[Any, ...], tuple[dict[str, Any], RowHash]] = {}
"""Rows hashed once per view shape: a kind's tests open many views on the same rows.

Keyed by the row's id, and holding the row itself, so a reused id is never mistaken."""


def _row_hash(row: dict[str, Any], spec: Spec) -> RowHash:
    cache_key = (
        spec.key,
        spec.key_type,
        spec.time,
        tuple(spec.fields.items()),
        spec.precision,
        id(row),
    )
    held = _HASHED.get(cache_key)
    if held is None or held[0] is not row:
        held = _HASHED[cache_key] = (row, _hash(row, spec))
    return held[1]


def _key(row: dict[str, Any], spec: Spec) -> d.Key:
    if isinstance(spec.key, str):
        return row[spec.key]  # type: ignore[no-any-return]
    return tuple(row[c] for c in spec.key)


def _key_types(spec: Spec) -> d.KeyTypes:
    if isinstance(spec.key, str) or isinstance(spec.key_type, tuple):
        return spec.key_type  # type: ignore[return-value]
    return (spec.key_type,) * len(spec.key)  # type: ignore[return-value]


def _hash(row: dict[str, Any], spec: Spec) -> RowHash:
    key = _key(row, spec)
    values = [row[column] for column, _ in spec.fields.values()]
    types = [type_ for _, type_ in spec.fields.values()]
    key_hash, row_hash = d.hash_row(
        key,
        _key_types(spec),
        values,
        types,  # type: ignore[arg-type]
        spec.precision,  # type: ignore[arg-type]
    )
    return RowHash(None if key is None else d.key_text(key), key_hash, row_hash, row[spec.time])


def adapter(rows: Sequence[dict[str, Any]], spec: Spec) -> MemoryAdapter:
    """Return a MemoryAdapter over the rows a view as `spec` holds, exclusions by reason."""
    kept: list[RowHash] = []
    excluded: list[tuple[datetime, str]] = []
    for row in rows:
        if spec.keep is not None and not spec.keep.matches(row):
            continue
        reason = NULL_KEY if d.has_null_part(_key(row, spec)) else None
        reason = reason or next((r.name for r in spec.exclusions if r.matches(row)), None)
        if reason is None:
            kept.append(_row_hash(row, spec))
        else:
            excluded.append((row[spec.time], reason))
    return MemoryAdapter(kept, ZoneInfo(spec.tz), excluded)


class _Opened(MemoryAdapter):
    """A MemoryAdapter its source keeps up to date until it is closed."""

    source: MemorySource | None = None
    spec: Spec | None = None

    async def close(self) -> None:
        """Stop following the source's changes."""
        if self.source is not None:
            self.source.opened.remove(self)
            self.source = None


class MemorySource:
    """A table as a list of rows in memory."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.rows = table.dicts()
        self.opened: list[_Opened] = []

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a MemoryAdapter over the rows; it sees later changes, as a store's would."""
        fresh = adapter(self.rows, spec)
        opened = _Opened(fresh.rows, fresh.timezone, fresh.excluded)
        opened.source, opened.spec = self, spec
        self.opened.append(opened)
        return opened

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Replace the rows with that id."""
        column = cast(str, self.table.id_column)
        names = [n for n, _ in self.table.columns]
        self.rows = [r for r in self.rows if r[column] != row_id]
        self.rows += [dict(zip(names, row, strict=True)) for row in rows]
        for opened in self.opened:
            fresh = adapter(self.rows, cast(Spec, opened.spec))
            opened.rows, opened.excluded = fresh.rows, fresh.excluded

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """A fake in memory always answers."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Nothing to remove."""


class MemoryGolden:
    """One in-memory row per golden vector."""

    def __init__(self, vectors: Sequence[dict[str, Any]], at: datetime) -> None:
        self.vectors = vectors
        self.at = at

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return a MemoryAdapter holding vector n's row."""
        vector = self.vectors[n]
        row = {"k": vector["key"], "t": self.at} | {
            f"c{i}": f["value"] for i, f in enumerate(vector["fields"])
        }
        spec = Spec.of_golden(vector)
        return adapter([row], spec)

    async def encoding(self, n: int) -> str:
        """The fake has no engine of its own to encode with."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Nothing to remove."""


class MemoryFixtures:
    """Fixtures of the in-memory fake."""

    capabilities = frozenset({SLOT_FIRST_PASS, ROW_CHANGES, COMPOSITE_KEYS})
    failures: Failures | None = None

    async def load(self, table: Table) -> MemorySource:
        """Hold the table's rows."""
        return MemorySource(table)

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> MemoryGolden:
        """Hold one row per vector."""
        return MemoryGolden(vectors, at)

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """A fake in memory is always reachable."""
        raise NotImplementedError
