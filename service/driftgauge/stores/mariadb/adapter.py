"""The MariaDB adapter: the shared dialect queries run inside the database (aiomysql pool)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from typing import Any, Self

import aiomysql

from driftgauge.config.frozen import View
from driftgauge.core.clock import MICROSECOND
from driftgauge.core.errors import StoreQueryError
from driftgauge.stores.mariadb import io, preflight
from driftgauge.stores.mariadb.dialect import MARIADB, naive_utc
from driftgauge.stores.mariadb.settings import MariaDBStore
from driftgauge.stores.preflight import FieldSchema
from driftgauge.stores.sql.engines import EngineAdapter
from driftgauge.stores.sql.results import ExportedRow

ZONE_RANGE = (datetime(1970, 1, 2, tzinfo=UTC), datetime(2038, 1, 18, tzinfo=UTC))
"""CONVERT_TZ leaves a time outside TIMESTAMP's range unconverted: days there are refused."""


class MariaDBAdapter(EngineAdapter):
    """Read a MariaDB source (with exclusions) or a MariaDB reader view."""

    dialect = MARIADB
    store_type = MariaDBStore
    store: MariaDBStore

    @classmethod
    async def open(cls, view: View, pool: Any = None) -> Self:
        """Return an adapter on the store's shared pool, or on a pool of its own.

        The view's time zone must be in the server's zone tables: without them CONVERT_TZ
        returns NULL and every day would be lost.
        """
        store = cls.store_of(view)
        MARIADB.bucket_sql(view)  # refuse a malformed view before opening connections
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
            "SELECT CONVERT_TZ('2000-06-01 00:00:00', '+00:00', %(a1)s) IS NOT NULL AS known",
            zone,
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
        timeout = self.store.timeout
        where = self._where("check the columns")
        async with io.connection(self._pool, self.store.name, where, timeout) as conn:
            async with asyncio.timeout(timeout):
                return await preflight.describe(conn, self.view)

    async def close(self) -> None:
        """Close the pool, unless the store's other views share it."""
        if self._owns_pool:
            await io.close_pool(self._pool, self.store.timeout)

    def _check_days(self, start: datetime, end: datetime) -> None:
        if start < ZONE_RANGE[0] or end > ZONE_RANGE[1]:
            raise StoreQueryError(
                self.store.name,
                (
                    f"{self._where('day buckets')}: MariaDB converts time zones only "
                    f"between {ZONE_RANGE[0].date()} and {ZONE_RANGE[1].date()}, the window is "
                    f"{start.isoformat()} to {end.isoformat()}"
                ),
            )

    def _day_args(self, start: datetime, end: datetime) -> tuple[Any, ...]:
        self._check_days(start, end)
        return "day", self.view.timezone.key  # the zone is parameter 4 (see bucket)

    def _slot_args(self, start: datetime, step: timedelta) -> tuple[Any, ...]:
        return step // MICROSECOND, start

    def _day_slot_args(self, start: datetime, end: datetime, step: timedelta) -> tuple[Any, ...]:
        self._check_days(start, end)
        return step // MICROSECOND, self.view.timezone.key, start

    async def _export(
        self, sql: str, args: list[Any], *, ranged: bool
    ) -> AsyncIterator[ExportedRow]:
        """Yield the export's rows through an unbuffered cursor, fetch_rows at a time."""
        timeout = self.store.timeout
        where = self._where("export rows")
        async with (
            io.connection(self._pool, self.store.name, where, timeout) as conn,
            conn.cursor(aiomysql.SSDictCursor) as cur,
        ):
            async with asyncio.timeout(timeout):
                await cur.execute(sql, MARIADB.bind(args))
            while True:
                async with asyncio.timeout(timeout):
                    batch = await cur.fetchmany(self.fetch_rows)
                for r in batch:
                    yield r["ktext"], r["khash"], r["rhash"], _utc(r["t"])
                if len(batch) < self.fetch_rows:
                    break

    async def query_key(self, query: str, start: datetime, end: datetime) -> str | None:
        """Return the first value of the operator's key query (%(start)s, %(end)s its bounds)."""
        args = {"start": naive_utc(start), "end": naive_utc(end)}
        timeout = self.store.timeout
        async with (
            io.connection(self._pool, self.store.name, "pick a canary key", timeout) as conn,
            asyncio.timeout(timeout),
            conn.cursor() as cur,
        ):
            await cur.execute(query, args)
            row = await cur.fetchone()
        return None if row is None or row[0] is None else str(row[0])

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[Any]:
        timeout = self.store.timeout
        async with (
            io.connection(self._pool, self.store.name, self._where(what), timeout) as conn,
            asyncio.timeout(timeout),
            conn.cursor(aiomysql.DictCursor) as cur,
        ):
            await cur.execute(sql, MARIADB.bind(args))
            return list(await cur.fetchall())


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):  # a DATE time column: its midnight, read as UTC
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise TypeError(f"the time column holds {type(value).__name__}, not a date or time")
