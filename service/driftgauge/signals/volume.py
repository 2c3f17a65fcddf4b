"""Volume band: a day's distinct source keys against the trailing days' mean ± k sd.

Counting distinct keys, not rows, keeps duplicates from inflating the count; judging the
source alone catches a source that went empty while the reader (empty too) agrees with it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from driftgauge.config.runtime import Check, Volume
from driftgauge.engine import plan
from driftgauge.stores.base import StoreAdapter


@dataclass(frozen=True)
class VolumeDay:
    """One day bucket's distinct-key count and the band it is judged against."""

    day: date
    distinct_keys: int
    mean: float
    sd: float
    low: float
    high: float

    @property
    def anomaly(self) -> bool:
        """Return True when the count is outside the band."""
        return not self.low <= self.distinct_keys <= self.high


def judge_days(counts: Mapping[date, int], days: Sequence[date],
               volume: Volume) -> list[VolumeDay]:
    """Judge each day against the `volume.trailing` days before it (absent days count 0)."""
    out = []
    for day in days:
        history = [counts.get(day - timedelta(days=i), 0)
                   for i in range(1, volume.trailing + 1)]
        mean = statistics.fmean(history)
        sd = statistics.pstdev(history, mean)
        out.append(VolumeDay(day, counts.get(day, 0), mean, sd, mean - volume.sigmas * sd,
                             mean + volume.sigmas * sd))
    return out


def settled_days(check: Check, start: datetime, end: datetime, now: datetime) -> list[date]:
    """Return the local days in [start, end) old enough to judge (never a settling bucket)."""
    return [s.date() for s in plan.day_starts(start, end, check.timezone)
            if plan.next_day(s, check.timezone) <= now - check.settle]


async def measure_volume(check: Check, source: StoreAdapter, start: datetime, end: datetime,
                         now: datetime) -> list[VolumeDay]:
    """Return the volume verdict of every settled day in [start, end), counted in the source."""
    volume = check.volume or Volume()
    days = settled_days(check, start, end, now)
    if not days:
        return []
    first = days[0] - timedelta(days=volume.trailing)
    last = days[-1] + timedelta(days=1)
    span_start = datetime(first.year, first.month, first.day, tzinfo=check.timezone)
    span_end = datetime(last.year, last.month, last.day, tzinfo=check.timezone)
    buckets = await source.bucket_digests(span_start, span_end, "day")
    counts = {b.start.astimezone(check.timezone).date(): b.agg.distinct_keys for b in buckets}
    return judge_days(counts, days, volume)
