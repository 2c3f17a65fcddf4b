"""Scan and peel the days whose stored verdict was drift while the first pass still runs.

A run planned as day aggregates plus a scan of each drifted day (jobs.first_pass) used
to start those scans only once the first pass had judged the days differing, and to peel
them after that: the day scans, the peel and the fetch of the differing rows were a tail
after the pass. They do not depend on it. Started with the pass, they share the cores
with it and the tail is the judging alone (bench/RESULTS.md). Nothing found early is
used before the day's first-pass aggregates vouch for it: the scan must have seen the
day (or the rest of the day, for a part) as the pass did (engine.resize), or the day is
judged as if nothing had been done early.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from driftgauge.core.aggregate import Aggregate
from driftgauge.encoding import iblt, sizing
from driftgauge.engine import peel, plan, resize
from driftgauge.engine.first_pass import DayTables
from driftgauge.engine.sides import Sides, utc
from driftgauge.stores.base import DigestPass, RowHash

CONCURRENCY = 2
"""Days scanned early at once, each holding a connection a side beside the first pass:
with the default pool_max of 4 (docs/load.md), one a side stays free for the pass even
when another check shares the store. More would not be faster: the scans and the pass
already share the cores."""


@dataclass(frozen=True)
class Early:
    """One day's scan (of the day, or of the hours its drift sat in) and what it peeled."""

    source: DigestPass
    reader: DigestPass
    width: int
    whole: bool
    """The scan covered the whole day (else the part plan.cover chose)."""
    rows: tuple[list[RowHash], list[RowHash]] | None
    """Each side's differing rows, peeled and fetched; None when the tables did not say."""

    def tables(self, day: datetime, source: Aggregate, reader: Aggregate) -> DayTables | None:
        """Return the day's tables when the first pass's aggregates vouch for the scan."""
        vouch = resize.whole_tables if self.whole else resize.part_tables
        got = vouch(day, source, reader, self.source, self.reader)
        return None if got is None else DayTables(got[0], got[1], self.width)


def width_of(sides: Sides, drift: plan.StoredDrift) -> int:
    """Return the width a day's scan is sized at: its stored rows, or enough to estimate them."""
    widest = widest_of(sides)
    if drift.rows:
        return iblt.width_for(drift.rows, widest)
    return min(sizing.ESTIMATE_WIDTH, widest)


def widest_of(sides: Sides) -> int:
    """Return the widest table both sides build for one day (see iblt.widest)."""
    return min(iblt.widest(sides.source.inner), iblt.widest(sides.reader.inner))


async def scan_day(
    sides: Sides, start: datetime, end: datetime, drift: plan.StoredDrift, gate: asyncio.Semaphore
) -> Early:
    """Scan one drifted day (or its stored hours) for its digests, then peel and fetch."""
    width = width_of(sides, drift)
    lo, hi = plan.cover(start, end, drift.hours)
    async with gate:
        s_dp, r_dp = await sides.both(lambda s: s.digest_pass(lo, hi, width))
    s_t, r_t = resize.table_of(s_dp, start), resize.table_of(r_dp, start)
    # No wider retry here: that one is checked against the pass's aggregates first.
    rows = await peel.differing_rows(s_t, r_t, width, peel.fetcher(sides, start, end))
    return Early(s_dp, r_dp, width, (lo, hi) == (start, end), rows)


@asynccontextmanager
async def started(
    sides: Sides,
    starts: list[datetime],
    ends: Mapping[datetime, datetime],
    drift: Mapping[datetime, plan.StoredDrift],
) -> AsyncIterator[dict[datetime, asyncio.Task[Early]]]:
    """Start the early scan of each day of `starts` that `drift` names (by UTC start).

    Yields the tasks by UTC day start. On leaving, the ones still running are cancelled
    and every one is waited for, so no store call outlives the run; a failure of a scan
    no day awaited goes with it, since no verdict rests on it.
    """
    gate = asyncio.Semaphore(CONCURRENCY)
    tasks = {
        utc(s): asyncio.ensure_future(scan_day(sides, s, ends[s], drift[utc(s)], gate))
        for s in starts
        if utc(s) in drift
    }
    try:
        yield tasks
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
