"""The Trino adapter: the shared dialect queries run by a Trino cluster, off the loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import Any

from driftgauge.core import buckets
from driftgauge.core.clock import EPOCH, MICROSECOND
from driftgauge.core.errors import StoreError
from driftgauge.stores.base import BucketDigest, Granularity, LazySlots, SlotPass, check_slot
from driftgauge.stores.preflight import FieldSchema
from driftgauge.stores.sql.adapter import DialectAdapter
from driftgauge.stores.sql.results import ExportedRow, numbered_slots
from driftgauge.stores.trino import io, preflight
from driftgauge.stores.trino.dialect import TRINO
from driftgauge.stores.trino.settings import TrinoStore


def micros(moment: datetime) -> int:
    """Return an aware instant as epoch microseconds."""
    return (moment - EPOCH) // MICROSECOND


class TrinoAdapter(DialectAdapter):
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

    async def close(self) -> None:
        """Close the session, unless the store's other views share it."""
        if self._owns_pool:
            await self._pool.close()

    def _midnight(self, day: Any) -> datetime:
        local = day if isinstance(day, date) else date.fromisoformat(str(day))
        return buckets.midnight(local, self.view.timezone)

    async def _day_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        rows = await self._fetch(
            "bucket digests", self._sql_bucket, start, end, self.view.timezone.key
        )
        return self._buckets([r | {"bucket": self._midnight(r["bucket"])} for r in rows])

    def _slot_args(self, start: datetime, step: timedelta) -> tuple[Any, ...]:
        return step // MICROSECOND, micros(start)

    def _slot_rows(self, rows: list[Any], start: datetime, step: timedelta) -> list[Any]:
        # The server numbers each slot from start: turn the number back into its instant.
        origin = start.astimezone(UTC)
        return [r | {"bucket": origin + step * int(r["bucket"])} for r in rows]

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> SlotPass:
        """Return day buckets and their slots (spans of `seconds` from start) from one scan."""
        step = check_slot(start, seconds)
        if start >= end:
            return SlotPass([], {})
        args = (self.view.timezone.key, step // MICROSECOND, micros(start))
        rows = await self._fetch("day and slot digests", self._sql_day_slot, start, end, *args)
        origin = start.astimezone(UTC)
        by_day: dict[datetime, list[dict[str, Any]]] = {}
        day_rows = []
        for r in rows:
            midnight = self._midnight(r["bucket"])
            if r["slot"] is None:
                day_rows.append(r | {"bucket": midnight})
            else:
                by_day.setdefault(midnight, []).append(r)
        return SlotPass(
            self._buckets(day_rows),
            LazySlots(by_day, lambda rs: numbered_slots(rs, origin, step)),
        )

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

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            if not io.driver_error(exc):
                raise
            raise io.store_error(self.store.name, what, exc) from exc
