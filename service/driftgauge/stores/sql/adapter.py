"""What every SQL adapter shares: its view, its store, the exclusion reasons, compiled SQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, ClassVar, Self

from driftgauge.config.frozen import Store, View
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.errors import StoreError
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores import registry
from driftgauge.stores.base import (
    BucketDigest,
    Granularity,
    ReadAdapter,
    RowHash,
    SlotPass,
    Spans,
    check_slot,
)
from driftgauge.stores.sql import results
from driftgauge.stores.sql.dialect import SqlDialect
from driftgauge.stores.sql.results import ExportedRow


class SqlAdapter(ReadAdapter):
    """The base of the SQL adapters; a kind names its dialect (queries and name) and store type."""

    dialect: ClassVar[SqlDialect] = SqlDialect()
    """The kind's queries; its `name` is the store kind's name, in messages."""
    store_type: ClassVar[type[Any]] = object
    """The runtime store a view of this kind must name."""
    store: Store

    def __init__(self, view: View, pool: Any, *, owns_pool: bool = True) -> None:
        self._pool = pool
        """The store's pool (or connection); closed by close() only when this adapter owns it."""
        self._owns_pool = owns_pool
        self.view = view
        self.store = self.store_of(view)
        self._reasons = [ex.reason for ex in view.sql_rules]
        self._compile()

    @classmethod
    def store_of(cls, view: View) -> Any:
        """Return the view's store; ValueError when it is not a store of this kind."""
        if not isinstance(view.store, cls.store_type):
            kind = cls.dialect.name
            raise ValueError(f"a {kind} view needs a {kind} store")
        return view.store

    def _compile(self) -> None:
        """Build the view's queries; again whenever the timestamp precision changes."""

    def use_timestamp_precision(self, precision: TimestampPrecision) -> None:
        """Hash timestamp fields at `precision` from the next query on."""
        if precision != self.view.timestamp_precision:
            self.view = replace(self.view, timestamp_precision=precision)
            self._compile()

    def _where(self, what: str) -> str:
        target = self.view.table if self.view.table is not None else "view query"
        return f"{what} on {target}"


class DialectAdapter(SqlAdapter):
    """An SQL adapter that runs the shared dialect queries with positional arguments."""

    fetch_rows: ClassVar[int] = 2000
    """Rows per round trip of a row export's cursor."""

    @classmethod
    async def open(cls, view: View, pool: Any = None) -> Self:
        """Return an adapter on the store's shared pool, or on a pool of its own.

        A pool of its own is opened, and checked, as the kind connects a store.
        """
        store = cls.store_of(view)
        cls.dialect.bucket_sql(view)  # refuse a malformed view before opening connections
        if pool is not None:
            return cls(view, pool, owns_pool=False)
        return cls(view, await registry.kind_of(cls.dialect.name).connect(store))

    async def close(self) -> None:
        """Close the pool (or session), unless the store's other views share it."""
        if self._owns_pool:
            await self._pool.close()

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Raise the driver's errors inside as ours, by the kind's error map; bugs as they are."""
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            mapped = registry.kind_of(self.dialect.name).error_map(self.store.name, what, exc)
            if mapped is None:
                raise
            raise mapped from exc

    def _compile(self) -> None:
        view = self.view
        self._sql_bucket = self.dialect.bucket_sql(view)
        self._sql_slot = self.dialect.slot_sql(view)
        self._sql_slot_rows = self.dialect.slot_sql(view, distinct=False)
        self._sql_day_slot = self.dialect.day_slot_sql(view)

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[Any]:
        """Return the rows of `sql`, its driver's errors mapped to ours."""
        raise NotImplementedError

    def _day_args(self, start: datetime, end: datetime) -> tuple[Any, ...]:
        """Return the day query's arguments after the window's bounds."""
        raise NotImplementedError

    def _slot_args(self, start: datetime, step: timedelta) -> tuple[Any, ...]:
        """Return the slot query's arguments after the window's bounds (slots from start)."""
        raise NotImplementedError

    def _slot_rows(self, rows: list[Any], start: datetime, step: timedelta) -> list[Any]:
        """Return the slot query's rows with each `bucket` as its slot's start instant."""
        return rows

    def _day_slot_args(self, start: datetime, end: datetime, step: timedelta) -> tuple[Any, ...]:
        """Return the one-scan day and slot query's arguments after the window's bounds."""
        raise NotImplementedError

    def _export(self, sql: str, args: list[Any], *, ranged: bool) -> AsyncIterator[ExportedRow]:
        """Yield the rows of the export query (`ranged`: it reads sub-ranges), in batches."""
        raise NotImplementedError

    async def _rows(
        self, start: datetime, end: datetime, prefixes: Sequence[str] | None, spans: Spans | None
    ) -> AsyncIterator[RowHash]:
        """Yield the expected rows of the dialect's export query, as the kind streams them."""
        sql, args = results.rows_query(self.dialect, self.view, start, end, prefixes, spans)
        composite = self.view.composite
        async for row in self._export(sql, args, ranged=spans is not None):
            yield results.exported_row(row, composite)

    def _buckets(self, rows: list[Any]) -> list[BucketDigest]:
        return results.buckets(rows, self._reasons, self.view.measures)

    async def _day_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        args = self._day_args(start, end)
        return self._buckets(
            await self._fetch("bucket digests", self._sql_bucket, start, end, *args)
        )

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        """Return per-slot aggregates (spans of absolute time from start), excluded by reason."""
        step = check_slot(start, seconds)
        if start >= end:
            return []
        sql = self._sql_slot if distinct else self._sql_slot_rows
        rows = await self._fetch("slot digests", sql, start, end, *self._slot_args(start, step))
        return self._buckets(self._slot_rows(rows, start, step))

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> SlotPass:
        """Return day buckets and their slots (spans of absolute time from start), one scan."""
        step = check_slot(start, seconds)
        if start >= end:
            return SlotPass([], {})
        args = self._day_slot_args(start, end, step)
        rows = await self._fetch("day and slot digests", self._sql_day_slot, start, end, *args)
        return self._slot_pass(rows, start, step)

    def _slot_pass(self, rows: list[Any], start: datetime, step: timedelta) -> SlotPass:
        """Return the one-scan query's rows as day buckets (slot NULL) and their slots."""
        return SlotPass(self._buckets([r for r in rows if r["slot"] is None]), results.slots(rows))

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        """Return aggregates grouped by the first `depth` hex digits of the key hash."""
        query = results.prefix_query(self.dialect, self.view, start, end, depth, within)
        if query is None:
            return {}
        return results.prefixes(await self._fetch("prefix digests", query[0], *query[1]))

    async def value_counts(
        self, column: str, start: datetime, end: datetime
    ) -> dict[str | None, int]:
        """Return expected rows per text value of `column` in [start, end) (None: NULL)."""
        rows = await self._fetch(
            f"count values of {column}",
            self.dialect.value_counts_sql(self.view, column),
            start,
            end,
        )
        return {r["value"]: int(r["n"]) for r in rows}
