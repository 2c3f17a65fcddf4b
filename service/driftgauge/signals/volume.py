"""Volume band: a day's distinct source keys against the trailing days' mean ± k sd.

Counting distinct keys, not rows, keeps duplicates from inflating the count; judging the
source alone catches a source that went empty while the reader (empty too) agrees with it.
Days before the source's first row are not history: they would count as empty days and
flag the healthy first weeks of a new source, so a day with fewer trailing days of history
than `volume.needed_history` is `insufficient_history`, never judged.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal, get_args

from driftgauge.config.frozen import Check, Volume
from driftgauge.engine import plan
from driftgauge.stores.base import StoreAdapter

VolumeStatus = Literal["ok", "anomaly", "insufficient_history"]
VOLUME_STATUSES: tuple[VolumeStatus, ...] = get_args(VolumeStatus)


@dataclass(frozen=True)
class VolumeDay:
    """One day bucket's distinct-key count and the band it is judged against."""

    day: date
    distinct_keys: int
    mean: float
    sd: float
    low: float
    high: float
    history_days: int | None
    """Trailing days the band was computed from (none before the source's first row);
    None for a verdict stored before it was counted."""
    status: VolumeStatus

    @property
    def anomaly(self) -> bool:
        """Return True when the day was judged and its count is outside the band."""
        return self.status == "anomaly"


def judge_days(counts: Mapping[date, int], days: Sequence[date], volume: Volume) -> list[VolumeDay]:
    """Judge each day against the `volume.trailing` days before it.

    Absent days count 0 from the first day with a row on (a source that went empty is the
    point); days before it are not history. Too few of them: `insufficient_history`.
    """
    seen = [d for d, n in counts.items() if n > 0]
    born = min(seen) if seen else None
    out = []
    for day in days:
        back = [day - timedelta(days=i) for i in range(1, volume.trailing + 1)]
        history = [counts.get(d, 0) for d in back if born is not None and d >= born]
        mean = statistics.fmean(history) if history else 0.0
        sd = statistics.pstdev(history, mean) if history else 0.0
        low, high = mean - volume.sigmas * sd, mean + volume.sigmas * sd
        n = counts.get(day, 0)
        status: VolumeStatus = (
            "insufficient_history"
            if len(history) < volume.needed_history
            else "ok"
            if low <= n <= high
            else "anomaly"
        )
        out.append(VolumeDay(day, n, mean, sd, low, high, len(history), status))
    return out


def settled_days(check: Check, start: datetime, end: datetime, now: datetime) -> list[date]:
    """Return the local days in [start, end) old enough to judge (never a settling bucket)."""
    return [
        s.date()
        for s in plan.day_starts(start, end, check.timezone)
        if plan.next_day(s, check.timezone) <= now - check.settle
    ]


async def measure_volume(
    check: Check, source: StoreAdapter, start: datetime, end: datetime, now: datetime
) -> list[VolumeDay]:
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
