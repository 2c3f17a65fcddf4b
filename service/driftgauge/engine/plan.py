"""Pure decisions of the drill-down: when to fetch rows, how wide to split by prefix."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo

from driftgauge.config.frozen import Drilldown
from driftgauge.core.aggregate import Aggregate

# Slot lengths that divide an hour, so slots never straddle an hour boundary.
SLOT_SECONDS = (
    60,
    90,
    120,
    150,
    180,
    200,
    225,
    240,
    300,
    360,
    400,
    450,
    600,
    720,
    900,
    1200,
    1800,
    3600,
)
# Rows per slot to aim for: a slot query costs about the same for 24 or 1,440 groups,
# so small slots make a differing slot, and the rows fetched for it, small.
ROWS_PER_SLOT = 8

# Aim for this many prefixes per expected differing key, so that a leaf that differs
# holds few clean rows and fetching it costs little more than the drift itself.
FANOUT_PER_DIFF = 8


RESCAN_SHARE = 4
"""Differing days are scanned alone for their digests only when they are at most this
fraction (1/4) of a window's days: drilling down many days with a few differing rows
each was faster (5.4 s against 7.1 s at 1M rows, drift on all 40 days)."""


def few_days(differing: int, days: int) -> bool:
    """Return True when `differing` days of `days` are few enough to scan each alone."""
    return differing > 0 and differing * RESCAN_SHARE <= days


class StoredDrift(NamedTuple):
    """What a day's latest stored verdict says of its drift, to plan that day's scan."""

    rows: int
    """The rows it differed by (a mismatched key is two, one a side)."""
    hours: tuple[datetime, ...] = ()
    """The (UTC) starts of the hours that held them, when its digests peeled."""


COVER_SHARE = 0.5
"""A day's scan covers only the hours its stored drift sat in when they span at most
this share of the day: a cover near the whole day saves little, and a day whose drift
has moved out of it costs one more scan."""


def cover(start: datetime, end: datetime, hours: Sequence[datetime]) -> tuple[datetime, datetime]:
    """Return the span of [start, end) from the first to the end of the last of `hours`.

    The whole day when no hours are given, when they fall outside the day, or when
    their span is more than COVER_SHARE of it.
    """
    inside = [h for h in hours if start - timedelta(hours=1) < h < end]
    if not inside:
        return start, end
    lo, hi = max(start, min(inside)), min(end, max(inside) + timedelta(hours=1))
    if (hi - lo) > (end - start) * COVER_SHARE:
        return start, end
    return lo, hi


def is_dense(source: Aggregate, reader: Aggregate, plan: Drilldown) -> bool:
    """Return True when the count gap alone says most of the bucket differs."""
    big = max(source.count, reader.count)
    if big == 0:
        return False
    return abs(source.count - reader.count) / big > plan.dense_ratio


def fits_leaf(source: Aggregate, reader: Aggregate, plan: Drilldown) -> bool:
    """Return True when both sides are small enough to fetch and join in memory."""
    return max(source.count, reader.count) <= plan.leaf_rows


def estimate_diffs(differing: int, total: int) -> float:
    """Estimate differing keys from how many of `total` equal parts differ (Poisson)."""
    if total <= 0 or differing <= 0:
        return 0.0
    if differing >= total:
        return float(total) * 4  # every part differs: at least several per part
    return -total * math.log(1 - differing / total)


def prefix_step(rows: int, est_diffs: float, plan: Drilldown, depth: int) -> int:
    """Return how many hex digits to add so leaves are small and mostly clean."""
    want = max(rows / max(plan.leaf_rows, 1), est_diffs * FANOUT_PER_DIFF, 2.0)
    step = max(1, math.ceil(math.log(want, 16)))
    return max(1, min(step, plan.max_depth - depth))


def slot_seconds(day_rows: int) -> int:
    """Return the slot length that puts about ROWS_PER_SLOT rows of a day in each slot."""
    want = 86400 * ROWS_PER_SLOT / max(day_rows, 1)
    fitting = [s for s in SLOT_SECONDS if s <= want]
    return fitting[-1] if fitting else SLOT_SECONDS[0]


def merge_ranges(ranges: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Return sorted ranges with touching or overlapping ones joined."""
    out: list[tuple[datetime, datetime]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def day_starts(start: datetime, end: datetime, tz: ZoneInfo) -> list[datetime]:
    """Return the local-midnight starts of every day bucket overlapping [start, end)."""
    day = start.astimezone(tz).date()
    last = (end - timedelta(microseconds=1)).astimezone(tz).date()
    out = []
    while day <= last:
        out.append(datetime(day.year, day.month, day.day, tzinfo=tz))
        day += timedelta(days=1)
    return out


def next_day(start: datetime, tz: ZoneInfo) -> datetime:
    """Return the next local midnight after a day bucket's start (DST-safe)."""
    d = start.astimezone(tz).date() + timedelta(days=1)
    return datetime(d.year, d.month, d.day, tzinfo=tz)
