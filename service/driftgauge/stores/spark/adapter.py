"""The Spark adapter: the shared dialect queries run by a Spark Connect server, off the loop."""

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
from driftgauge.stores.spark import io, preflight
from driftgauge.stores.spark.dialect import SPARK
from driftgauge.stores.spark.settings import SparkStore
from driftgauge.stores.sql.adapter import DialectAdapter
from driftgauge.stores.sql.results import ExportedRow, numbered_slots


def micros(moment: datetime) -> int:
    """Return an aware instant as epoch microseconds."""
    return (moment - EPOCH) // MICROSECOND


class SparkAdapter(DialectAdapter):
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

    async def close(self) -> None:
        """Close the session, unless the store's other views share it."""
        if self._owns_pool:
            await self._pool.close()

    async def _refresh(self) -> None:
        # Spark caches a table's file listing per session: a table rewritten since the last
        # run would be read from files that are gone, or miss new ones.
        if self.view.query is None and self.view.table is not None:
            await self._pool.refresh(SPARK.relation(self.view).removesuffix(" AS src"))

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
            self._buckets(day_rows), LazySlots(by_day, lambda rs: numbered_slots(rs, origin, step))
        )

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
