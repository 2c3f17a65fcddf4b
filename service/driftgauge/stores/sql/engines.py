"""The half the distributed engines' adapters share (Trino, Spark): local days come back as
dates, slots as numbers counted from the window's start, driver errors mapped per kind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import Any

from driftgauge.core import buckets
from driftgauge.core.clock import EPOCH, MICROSECOND
from driftgauge.core.errors import StoreError
from driftgauge.stores.base import BucketDigest, Granularity, LazySlots, SlotPass, check_slot
from driftgauge.stores.sql.adapter import DialectAdapter
from driftgauge.stores.sql.results import numbered_slots


def micros(moment: datetime) -> int:
    """Return an aware instant as epoch microseconds."""
    return (moment - EPOCH) // MICROSECOND


class EngineAdapter(DialectAdapter):
    """A dialect adapter whose engine buckets by local date and numbers slots from start."""

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
            self._buckets(day_rows), LazySlots(by_day, lambda rs: numbered_slots(rs, origin, step))
        )

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            if not self._driver_error(exc):
                raise
            raise self._store_error(what, exc) from exc

    def _driver_error(self, exc: BaseException) -> bool:
        """Return whether `exc` is the engine's driver failing (mapped by _store_error)."""
        raise NotImplementedError

    def _store_error(self, what: str, exc: BaseException) -> StoreError:
        """Return the StoreError naming the store and the step for a driver failure."""
        raise NotImplementedError
