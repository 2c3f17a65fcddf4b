"""The DuckDB adapter: digests computed by SQL inside the embedded engine, off the event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from driftgauge.core import buckets as days
from driftgauge.core.clock import EPOCH, MICROSECOND
from driftgauge.stores.duckdb import io, preflight
from driftgauge.stores.duckdb.dialect import DUCKDB
from driftgauge.stores.duckdb.settings import DuckDBStore
from driftgauge.stores.preflight import FieldSchema
from driftgauge.stores.sql.adapter import DialectAdapter
from driftgauge.stores.sql.results import ExportedRow


class DuckDBAdapter(DialectAdapter):
    """Read a DuckDB source (with exclusions) or a DuckDB reader view."""

    dialect = DUCKDB
    store_type = DuckDBStore
    store: DuckDBStore
    _pool: io.Connection

    async def inspect_fields(self) -> list[FieldSchema]:
        """Return the type of each configured column (the preflight's view of this side)."""
        with self._errors("check the columns"):
            return await preflight.describe(self._pool, self.view)

    def _day_starts(self, start: datetime, end: datetime) -> list[datetime]:
        # From zoneinfo, as core.buckets defines a day: the engine's own tz data may differ.
        tz = self.view.timezone
        out = [days.day_start(start, tz)]
        while (nxt := days.day_end(out[-1], tz)) < end:
            out.append(nxt)
        return out

    def _day_args(self, start: datetime, end: datetime) -> tuple[Any, ...]:
        return (self._day_starts(start, end),)

    def _slot_args(self, start: datetime, step: timedelta) -> tuple[Any, ...]:
        # The step and the origin, in microseconds.
        return step // MICROSECOND, (start - EPOCH) // MICROSECOND

    def _day_slot_args(self, start: datetime, end: datetime, step: timedelta) -> tuple[Any, ...]:
        return self._day_starts(start, end), *self._slot_args(start, step)

    async def _export(
        self, sql: str, args: list[Any], *, ranged: bool
    ) -> AsyncIterator[ExportedRow]:
        """Yield the export's rows, fetched fetch_rows at a time in the engine's thread."""
        with self._errors("export rows"):
            cursor = await self._pool.cursor()
        try:
            with self._errors("export rows"):
                await self._pool.call(cursor, lambda: cursor.execute(sql, args))
            while True:
                with self._errors("export rows"):
                    batch = await self._pool.call(cursor, lambda: cursor.fetchmany(self.fetch_rows))
                for ktext, khash, rhash, t in batch:
                    yield ktext, khash, rhash, t.astimezone(UTC)
                if len(batch) < self.fetch_rows:
                    break
        finally:
            cursor.close()

    async def query_key(self, query: str, start: datetime, end: datetime) -> str | None:
        """Return the first value of the operator's key query ($1, $2 = start, end)."""
        with self._errors("pick a canary key"):
            rows = await self._pool.fetch(query, [start, end])
        value = next(iter(rows[0].values()), None) if rows else None
        return None if value is None else str(value)

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[dict[str, Any]]:
        with self._errors(self._where(what)):
            return await self._pool.fetch(sql, args)
