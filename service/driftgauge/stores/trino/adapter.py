"""The Trino adapter: the shared dialect queries run by a Trino cluster, off the loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from driftgauge.core.clock import EPOCH, MICROSECOND
from driftgauge.stores.preflight import FieldSchema
from driftgauge.stores.sql.engines import EngineAdapter
from driftgauge.stores.sql.results import ExportedRow
from driftgauge.stores.trino import io, preflight
from driftgauge.stores.trino.dialect import TRINO
from driftgauge.stores.trino.settings import TrinoStore


class TrinoAdapter(EngineAdapter):
    """Read a Trino source (with exclusions) or a Trino reader view."""

    dialect = TRINO
    store_type = TrinoStore
    store: TrinoStore
    _pool: io.TrinoSession
    fetch_rows = 10000

    async def inspect_fields(self) -> list[FieldSchema]:
        """Return the type of each configured column (the preflight's view of this side)."""
        with self._errors(self._where("check the columns")):
            return await preflight.describe(self._pool, self.view)

    async def _export(
        self, sql: str, args: list[Any], *, ranged: bool
    ) -> AsyncIterator[ExportedRow]:
        """Yield the export's rows, fetch_rows at a time from the cluster's result pages."""
        where = self._where("export rows")
        with self._errors(where):
            stream = await self._pool.stream(TRINO.render(sql, args))
        try:
            while True:
                with self._errors(where):
                    batch = await stream.batch(self.fetch_rows)
                for ktext, khash, rhash, t in batch:
                    yield ktext, khash, rhash, EPOCH + int(t) * MICROSECOND
                if len(batch) < self.fetch_rows:
                    break
        finally:
            stream.close()

    async def query_key(self, query: str, start: datetime, end: datetime) -> str | None:
        """Return the first value of the operator's key query (:start, :end its bounds)."""
        sql = query.replace(":start", TRINO.param(1)).replace(":end", TRINO.param(2))
        with self._errors("pick a canary key"):
            rows = await self._pool.fetch(TRINO.render(sql, [start, end]))
        value = next(iter(rows[0].values()), None) if rows else None
        return None if value is None else str(value)

    async def _fetch(self, what: str, sql: str, *args: Any) -> list[dict[str, Any]]:
        with self._errors(self._where(what)):
            return await self._pool.fetch(TRINO.render(sql, list(args)))
