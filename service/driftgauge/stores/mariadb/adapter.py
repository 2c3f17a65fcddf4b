"""The MariaDB adapter: digests computed by SQL inside the database (aiomysql pool)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any, Self

import aiomysql

from driftgauge.config.runtime import View
from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.errors import StoreQueryError
from driftgauge.encoding.digest import unsigned64
from driftgauge.stores.base import (
    BucketDigest,
    Granularity,
    RowHash,
    Spans,
    check_slot,
    no_prefixes,
)
from driftgauge.stores.mariadb import dialect, io, preflight
from driftgauge.stores.mariadb.settings import MariaDBStore
from driftgauge.stores.preflight import FieldSchema
from driftgauge.stores.sql import results
from driftgauge.stores.sql.adapter import SqlAdapter

FETCH_ROWS = 2000
"""Rows per round trip of the unbuffered cursor in iter_rows."""
ZONE_RANGE = (datetime(1970, 1, 2, tzinfo=UTC), datetime(2038, 1, 18, tzinfo=UTC))
"""CONVERT_TZ leaves a time outside TIMESTAMP's range unconverted: days there are refused."""


class MariaDBAdapter(SqlAdapter):
    """Read a MariaDB source (with exclusions) or a MariaDB reader view."""

    kind = "mariadb"
    store_type = MariaDBStore
    store: MariaDBStore

    def _compile(self) -> None:
        self._sql_day = dialect.day_sql(self.view)
        self._sql_slot = dialect.slot_sql(self.view)

    @classmethod
    async def open(cls, view: View, pool: Any = None) -> Self:
        """Return an adapter on the store's shared pool, or on a pool of its own.

        The view's time zone must be in the server's zone tables: without them CONVERT_TZ
        returns NULL and every day would be lost.
        """
        store = cls.store_of(view)
        dialect.day_sql(view)  # refuse a malformed view before opening connections
        adapter = cls(view, pool or await io.store_pool(store), owns_pool=pool is None)
        try:
            await adapter._check_zone()
        except BaseException:
            await adapter.close()
            raise
        return adapter

    async def _check_zone(self) -> None:
        zone = self.view.timezone.key
        rows = await self._fetch(
            "check the time zone tables",
            "SELECT CONVERT_TZ('2000-06-01 00:00:00', '+00:00', %(tz)s) IS NOT NULL AS known",
            {"tz": zone},
        )
        if not rows or not rows[0]["known"]:
            raise StoreQueryError(
                self.store.name,
                (
                    f"time zone {zone} is not in the server's zone tables; load them with "
                    "mariadb-tzinfo-to-sql /usr/share/zoneinfo | mariadb mysql"
                ),
            )

    async def inspect_fields(self) -> list[FieldSchema]:
        """Return the type of each configured column (the preflight's view of this side)."""
        async with (
            io.connection(
                self._pool,
                self.store.name,
                _where(self.view, "check the columns"),
                self.store.timeout,
            ) as conn,
            _deadline(self.store.timeout),
        ):
            return await preflight.describe(conn, self.view)

    async def close(self) -> None:
        """Close the pool, unless the store's other views share it."""
        if self._owns_pool:
            await io.close_pool(self._pool, self.store.timeout)

    async def _day_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        if start < ZONE_RANGE[0] or end > ZONE_RANGE[1]:
            raise StoreQueryError(
                self.store.name,
                (
                    f"day buckets of {_where(self.view)}: MariaDB converts time zones only "
                    f"between {ZONE_RANGE[0].date()} and {ZONE_RANGE[1].date()}, the window is "
                    f"{start.isoformat()} to {end.isoformat()}"
                ),
            )
        tz = self.view.timezone
        rows = await self._fetch(
            "bucket digests", self._sql_day, {**_window(start, end), "tz": tz.key}
        )
        return self._buckets(rows, lambda d: buckets.midnight(_as_date(d), tz))

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        """Return per-slot aggregates (slots of `seconds` from start), excluded by reason."""
        step = check_slot(start, seconds)
        if start >= end:
            return []
        origin = start.astimezone(UTC)
        rows = await self._fetch(
            "slot digests",
            self._sql_slot,
            {**_window(start, end), "origin": _param(start), "step": seconds * 1_000_000},
        )
        return self._buckets(rows, lambda n: origin + step * int(n))

    def _buckets(
        self, rows: list[dict[str, Any]], begin_of: Callable[[Any], datetime]
    ) -> list[BucketDigest]:
        out: dict[datetime, tuple[Aggregate, dict[str, int]]] = {}
        for r in rows:
            begin = begin_of(r["bucket"]).astimezone(UTC)
            agg, excluded = out.get(begin, (Aggregate(), {}))
            if r["rule"] is None:
                agg = replace(_aggregate(r), measures=results.totals(r, self.view.measures))
            else:
                reason = self._reasons[int(r["rule"]) - 1]
                excluded = excluded | {reason: excluded.get(reason, 0) + int(r["n"])}
            out[begin] = (agg, excluded)
        return [BucketDigest(start=b, agg=a, excluded=x) for b, (a, x) in sorted(out.items())]

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        """Return aggregates grouped by the first `depth` hex digits of the key hash."""
        if no_prefixes(start, end, depth, within):
            return {}
        args: dict[str, Any] = {**_window(start, end), "depth": depth}
        if within is not None:
            args |= dialect.like_patterns(list(within))
        sql = dialect.prefix_sql(self.view, within=None if within is None else len(within))
        rows = await self._fetch("prefix digests", sql, args)
        return {str(r["prefix"]): _aggregate(r) for r in rows}

    async def _rows(
        self, start: datetime, end: datetime, prefixes: Sequence[str] | None, spans: Spans | None
    ) -> AsyncIterator[RowHash]:
        """Yield expected rows through an unbuffered cursor, FETCH_ROWS at a time."""
        args: dict[str, Any] = _window(start, end)
        if prefixes is not None:
            args |= dialect.like_patterns(list(prefixes))
        for i, (lo, hi) in enumerate(spans or []):
            args |= {f"lo{i}": _param(lo), f"hi{i}": _param(hi)}
        sql = dialect.rows_sql(
            self.view,
            within=None if prefixes is None else len(prefixes),
            ranges=None if spans is None else len(spans),
        )
        timeout = self.store.timeout
        async with (
            io.connection(
                self._pool, self.store.name, _where(self.view, "export rows"), timeout
            ) as conn,
            conn.cursor(aiomysql.SSDictCursor) as cur,
        ):
            async with _deadline(timeout):
                await cur.execute(sql, args)
            while True:
                async with _deadline(timeout):
                    batch = await cur.fetchmany(FETCH_ROWS)
                for r in batch:
                    yield RowHash(
                        key=r["ktext"],
                        key_hash=str(r["khash"]),
                        row_hash=unsigned64(int(r["rhash"])),
                        event_time=_utc(r["t"]),
                    )
                if len(batch) < FETCH_ROWS:
                    break

    async def _fetch(self, what: str, sql: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        timeout = self.store.timeout
        async with (
            io.connection(self._pool, self.store.name, _where(self.view, what), timeout) as conn,
            _deadline(timeout),
            conn.cursor(aiomysql.DictCursor) as cur,
        ):
            await cur.execute(sql, args)
            return list(await cur.fetchall())


def _deadline(seconds: float) -> asyncio.Timeout:
    return asyncio.timeout(seconds)


def _where(view: View, what: str = "") -> str:
    target = view.table if view.table is not None else "view query"
    return f"{what} on {target}" if what else target


def _param(moment: datetime) -> datetime:
    """Return an aware instant as the naive UTC datetime a UTC session compares with."""
    if moment.tzinfo is None:
        raise ValueError("time bounds must be timezone-aware")
    return moment.astimezone(UTC).replace(tzinfo=None)


def _window(start: datetime, end: datetime) -> dict[str, Any]:
    return {"start": _param(start), "end": _param(end)}


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):  # a DATE time column: its midnight, read as UTC
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise TypeError(f"the time column holds {type(value).__name__}, not a date or time")


def _as_date(value: Any) -> date:
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value))


def _aggregate(r: dict[str, Any]) -> Aggregate:
    return Aggregate(
        count=int(r["n"]), distinct_keys=int(r["keys"]), digest=unsigned64(int(r["digest"]))
    )
