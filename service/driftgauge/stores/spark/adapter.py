"""The Spark adapter: the shared dialect queries run by a Spark Connect server, off the loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from driftgauge.core.clock import EPOCH, MICROSECOND
from driftgauge.stores.preflight import FieldSchema
from driftgauge.stores.spark import io, preflight
from driftgauge.stores.spark.dialect import SPARK
from driftgauge.stores.spark.settings import SparkStore
from driftgauge.stores.sql.engines import EngineAdapter
from driftgauge.stores.sql.results import ExportedRow


class SparkAdapter(EngineAdapter):
    """Read a Spark source (with exclusions) or a Spark reader view."""

    dialect = SPARK
    store_type = SparkStore
    store: SparkStore
    _pool: io.ConnectSession

    async def inspect_fields(self) -> list[FieldSchema]:
        """Return the type of each configured column (the preflight's view of this side)."""
        with self._errors(self._where("check the columns")):
            await self._refresh()
            return await preflight.describe(self._pool, self.view)

    async def _refresh(self) -> None:
        # Spark caches a table's file listing per session: a table rewritten since the last
        # run would be read from files that are gone, or miss new ones.
        if self.view.query is None and self.view.table is not None:
            await self._pool.refresh(SPARK.relation(self.view).removesuffix(" AS src"))

    async def _export(
        self, sql: str, args: list[Any], *, ranged: bool
    ) -> AsyncIterator[ExportedRow]:
        """Yield the export's rows, fetch_rows at a time from the server's stream."""
        where = self._where("export rows")
        with self._errors(where):
            await self._refresh()
        stream = self._pool.rows(sql, SPARK.bind(args))
        while True:
            with self._errors(where):
                batch = await self._pool.batch(stream, self.fetch_rows)
            for ktext, khash, rhash, t in batch:
                yield ktext, khash, rhash, EPOCH + int(t) * MICROSECOND
            if len(batch) < self.fetch_rows:
                break

    async def query_key(self, query: str, start: datetime, end: datetime) -> str | None:
        """Return the first value of the operator's key query (:start, :end its bounds)."""
        with self._errors("pick a canary key"):
            rows = await self._pool.fetch(query, {"start": start, "end": end})
        value = next(iter(rows[0].values()), None) if rows else None
        return None if value is None else str(value)

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[dict[str, Any]]:
        with self._errors(self._where(what)):
            await self._refresh()
            return await self._pool.fetch(sql, SPARK.bind(list(args)))
