"""The PostgreSQL adapter: digests computed by SQL inside the database (asyncpg pool)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from driftgauge.encoding import iblt
from driftgauge.encoding.digest import MASK64
from driftgauge.pg.calls import pooled
from driftgauge.pg.errors import store_errors
from driftgauge.pg.pools import close_pool
from driftgauge.stores.base import BucketDigest, DigestPass, Granularity
from driftgauge.stores.postgres import preflight
from driftgauge.stores.postgres.dialect import POSTGRES
from driftgauge.stores.postgres.settings import PostgresStore
from driftgauge.stores.preflight import FieldSchema
from driftgauge.stores.sql.adapter import DialectAdapter
from driftgauge.stores.sql.results import ExportedRow

HASHED = "SET LOCAL enable_sort = off; SET LOCAL plan_cache_mode = force_custom_plan"
"""Plan the digest queries' groups as hash aggregates, with the parameters known."""


class PostgresAdapter(DialectAdapter):
    """Read a PostgreSQL source (with exclusions) or a PostgreSQL reader view."""

    dialect = POSTGRES
    store_type = PostgresStore
    store: PostgresStore
    widest_digest = iblt.DAY_WIDTH
    """The cells are summed by hash aggregates in the database: a wide day costs a scan."""

    def _compile(self) -> None:
        super()._compile()
        self._sql_bucket_rows = POSTGRES.unique_bucket_sql(self.view)
        self._sql_day_cell = POSTGRES.day_cell_sql(self.view)
        self._sql_day_keys = POSTGRES.day_keys_sql(self.view)
        self._unique_args = preflight.unique_key_args(self.view)

    async def inspect_fields(self) -> list[FieldSchema]:
        """Return the type of each configured column (the preflight's view of this side)."""
        with store_errors(self.store.name, self._where("check the columns")):
            async with pooled(self._pool, self.store.timeout) as conn:
                return await preflight.describe(conn, self.view)

    async def close(self) -> None:
        """Close the pool, unless the store's other views share it."""
        if self._owns_pool:
            await close_pool(self._pool, self.store.timeout)

    def _day_args(self, start: datetime, end: datetime) -> tuple[Any, ...]:
        return "day", self.view.timezone.key

    def _slot_args(self, start: datetime, step: timedelta) -> tuple[Any, ...]:
        return step, start  # date_bin(step, t, start)

    def _day_slot_args(self, start: datetime, end: datetime, step: timedelta) -> tuple[Any, ...]:
        return step, self.view.timezone.key, start

    async def _day_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        timeout = self.store.timeout
        async with self._snapshot("bucket digests") as conn:
            sql = self._sql_bucket
            if await self._unique(conn):
                # No distinct count, so no sort is needed: the planner, guessing a group
                # a row, would still sort every row by day (1.13x the hashed pass).
                await conn.execute(HASHED, timeout=timeout)
                sql = self._sql_bucket_rows
            args = self._day_args(start, end)
            rows = await conn.fetch(sql, start, end, *args, timeout=timeout)
        return self._buckets(list(rows))

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> DigestPass:
        """Return day buckets and each day's difference digest from one scan.

        Keys unique by a constraint are counted as rows; otherwise a second query, in
        the same snapshot, counts each day's distinct keys (see dialect.day_cell_sql).
        """
        if not 1 <= width <= self.widest_digest:
            raise ValueError(f"width must be between 1 and {self.widest_digest}, got {width}")
        if start >= end:
            return DigestPass([], {})
        timeout, zone = self.store.timeout, self.view.timezone.key
        async with self._snapshot("day and cell digests") as conn:
            # The planner cannot count the cells, guesses millions of groups and sorts
            # 10M rows K + 1 times; the hash aggregate needs a few MB a day.
            await conn.execute(HASHED, timeout=timeout)
            rows = await conn.fetch(self._sql_day_cell, start, end, width, zone, timeout=timeout)
            keys = None
            if not await self._unique(conn):
                got = await conn.fetch(self._sql_day_keys, start, end, zone, timeout=timeout)
                keys = {_utc(r["bucket"]): r["keys"] for r in got}
        tables: dict[datetime, dict[int, iblt.Cell]] = {}
        # Cells by bucket as it came back: a dense day's tens of thousands of cells share
        # one day, converted once.
        by_bucket: dict[datetime, dict[int, iblt.Cell]] = {}
        days = []
        for r in rows:
            cell = r["cell"]
            if cell is not None:
                bucket = r["bucket"]
                table = by_bucket.get(bucket)
                if table is None:
                    table = by_bucket[bucket] = tables.setdefault(_utc(bucket), {})
                table[cell] = (
                    r["n"],
                    r["digest"] & MASK64,
                    r["checks"] & MASK64,
                    r["times"] & MASK64,
                )
            elif r["rule"] is not None:
                days.append(r)
            else:
                n = r["n"] if keys is None else keys[_utc(r["bucket"])]
                days.append({**dict(r.items()), "keys": n})
        return DigestPass(self._buckets(days), tables)

    async def _unique(self, conn: Any) -> bool:
        """Return True when a constraint makes the view's keys unique (see preflight)."""
        if self._unique_args is None:
            return False
        sql, *args = self._unique_args
        return bool(await conn.fetchval(sql, *args, timeout=self.store.timeout))

    @asynccontextmanager
    async def _snapshot(self, what: str) -> AsyncIterator[Any]:
        """Yield a connection in a read-only snapshot: its queries see one state of the data."""
        with store_errors(self.store.name, self._where(what)):
            async with (
                pooled(self._pool, self.store.timeout) as conn,
                conn.transaction(readonly=True, isolation="repeatable_read"),
            ):
                yield conn

    async def _export(
        self, sql: str, args: list[Any], *, ranged: bool
    ) -> AsyncIterator[ExportedRow]:
        """Yield the export's rows through a server-side cursor, fetch_rows at a time."""
        timeout = self.store.timeout
        async with self._snapshot("export rows") as conn:
            if ranged:
                # A generic plan cannot see the sub-range bounds and reads the whole
                # window; a custom plan turns each sub-range into an index range scan.
                await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan", timeout=timeout)
            cursor = await conn.cursor(sql, *args, timeout=timeout)
            while True:
                batch = await cursor.fetch(self.fetch_rows, timeout=timeout)
                for r in batch:
                    yield r["ktext"], r["khash"], r["rhash"], r["t"]
                if len(batch) < self.fetch_rows:
                    break

    async def query_key(self, query: str, start: datetime, end: datetime) -> str | None:
        """Return the first value of the operator's key query ($1, $2 = start, end)."""
        with store_errors(self.store.name, "pick a canary key"):
            async with pooled(self._pool, self.store.timeout) as conn:
                value = await conn.fetchval(query, start, end, timeout=self.store.timeout)
        return None if value is None else str(value)

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[Any]:
        with store_errors(self.store.name, self._where(what)):
            async with pooled(self._pool, self.store.timeout) as conn:
                return list(await conn.fetch(sql, *args, timeout=self.store.timeout))


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)
