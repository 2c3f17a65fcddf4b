"""A second pass: difference digests of only the days a first pass found differing.

With nothing known of a window's drift, its first pass is day aggregates only, the
floor a healthy run pays. When many of its days then differ, scanning each alone for
its digests and peeling it costs a fetch per day (40 days cost 7.1 s against 5.4 s
drilled down at 1M rows, bench/RESULTS.md); one scan of the differing days' ranges for
their digests costs what the digests cost for those days only, and their differing
rows are fetched at once (engine.peel_all). A day the second pass saw other aggregates
for than the first is left without tables: it changed in between, and is drilled down.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from driftgauge.core.aggregate import Aggregate
from driftgauge.encoding import iblt, sizing
from driftgauge.engine import early, plan, resize
from driftgauge.engine.first_pass import Days, DayTables
from driftgauge.engine.sides import Sides, utc
from driftgauge.stores.base import DigestPass

SCAN = "a second pass over the differing days"
"""What a table from this pass says it came from (see DayTables.scan)."""


def width_for(days: int, drift: Mapping[datetime, plan.StoredDrift], widest: int) -> int:
    """Return the sub-table width of a second pass over `days` days.

    A first run's budget of cells spread over the differing days only (sizing.first_width),
    or wider when a stored verdict of one of them differed by more.
    """
    stored = max((d.rows for d in drift.values()), default=0)
    want = max(sizing.first_width(days), iblt.width_for(stored, widest) if stored else 0)
    return min(want, widest)


async def second_pass(
    sides: Sides,
    days: Days,
    wanted: list[datetime],
    ends: Mapping[datetime, datetime],
    drift: Mapping[datetime, plan.StoredDrift],
) -> Days:
    """Return `days` with difference digests for each of `wanted` (UTC day starts).

    `ends` gives each day's end by its UTC start. Consecutive days are one range, one
    query a side; the ranges are scanned one after another, both sides at once.
    """
    if not wanted:
        return days
    width = width_for(len(wanted), drift, early.widest_of(sides))
    tables: dict[datetime, DayTables] = {}
    for lo, hi in plan.merge_ranges([(day, ends[day]) for day in wanted]):
        s_dp, r_dp = await _scan(sides, lo, hi, width)
        for day in wanted:
            if lo <= day < hi:
                got = _vouched(days, day, s_dp, r_dp)
                if got is not None:
                    tables[day] = DayTables(got[0], got[1], width, SCAN)
    return replace(days, tables={**days.tables, **tables})


async def _scan(
    sides: Sides, lo: datetime, hi: datetime, width: int
) -> tuple[DigestPass, DigestPass]:
    """Return both sides' digest pass over [lo, hi)."""
    return await sides.both(lambda s: s.digest_pass(lo, hi, width))


def _vouched(
    days: Days, day: datetime, s_dp: DigestPass, r_dp: DigestPass
) -> tuple[iblt.Table, iblt.Table] | None:
    """Return the day's tables when the second pass saw the day as the first did."""
    src, rdr = days.source.get(day), days.reader.get(day)
    s_agg = src.agg if src is not None else Aggregate()
    r_agg = rdr.agg if rdr is not None else Aggregate()
    return resize.whole_tables(utc(day), s_agg, r_agg, s_dp, r_dp)
