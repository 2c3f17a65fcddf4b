"""The half the adapters of engines that bucket by local date share (MariaDB, Trino, Spark):
local days come back as dates, slots as numbers counted from the window's start."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from driftgauge.core import buckets
from driftgauge.core.clock import EPOCH, MICROSECOND
from driftgauge.stores.base import BucketDigest, Granularity, LazySlots, SlotPass
from driftgauge.stores.sql.adapter import DialectAdapter
from driftgauge.stores.sql.results import numbered_slots


def micros(moment: datetime) -> int:
    """Return an aware instant as epoch microseconds."""
    return (moment - EPOCH) // MICROSECOND


class EngineAdapter(DialectAdapter):
    """A dialect adapter whose engine buckets by local date and numbers slots from start."""

    def _midnight(self, day: Any) -> datetime:
        """Return the UTC start of a local date the server computed (23- or 25-hour days too)."""
        local = day if isinstance(day, date) else date.fromisoformat(str(day))
        return buckets.midnight(local, self.view.timezone)

    def _day_args(self, start: datetime, end: datetime) -> tuple[Any, ...]:
        return (self.view.timezone.key,)

    async def _day_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        args = self._day_args(start, end)
        rows = await self._fetch("bucket digests", self._sql_bucket, start, end, *args)
        return self._buckets([r | {"bucket": self._midnight(r["bucket"])} for r in rows])

    def _slot_args(self, start: datetime, step: timedelta) -> tuple[Any, ...]:
        return step // MICROSECOND, micros(start)

    def _slot_rows(self, rows: list[Any], start: datetime, step: timedelta) -> list[Any]:
        # The server numbers each slot from start: turn the number back into its instant.
        origin = start.astimezone(UTC)
        return [r | {"bucket": origin + step * int(r["bucket"])} for r in rows]

    def _day_slot_args(self, start: datetime, end: datetime, step: timedelta) -> tuple[Any, ...]:
        return self.view.timezone.key, step // MICROSECOND, micros(start)

    def _slot_pass(self, rows: list[Any], start: datetime, step: timedelta) -> SlotPass:
        """Return the rows as day buckets (local dates) and slots (numbered from start)."""
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
