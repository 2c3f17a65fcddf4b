"""Peel every differing day of a first pass's difference digests, and fetch their rows at once.

Each differing day used to peel its tables and fetch its differing rows in a query a
side of its own: 80 queries for 40 days of evenly spread drift, most of what a run spent
after its first pass (bench/RESULTS.md). The peels need nothing but the tables, so they
all run first, and the rows at every instant they name come in one query a side, split
by day afterwards. A day whose table does not peel, or whose fetched rows are not the
ones its digests named, is left to judge_day, which scans and drills it as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from driftgauge.encoding import iblt
from driftgauge.encoding.digest import epoch_micros
from driftgauge.engine import peel
from driftgauge.engine.first_pass import DayTables
from driftgauge.engine.sides import Sides
from driftgauge.stores.base import RowHash

MAX_ROWS = 100_000
"""Named rows fetched in one go at most: beyond, each day fetches its own, a few at once,
so the memory a run holds follows the days judged at once, not the window's drift."""

Found = dict[datetime, tuple[list[RowHash], list[RowHash]]]
"""Each day's (by UTC start) differing rows of the source and of the reader."""


async def peeled_days(
    sides: Sides,
    tables: Mapping[datetime, DayTables],
    wanted: Callable[[datetime], bool],
    start: datetime,
    end: datetime,
) -> Found:
    """Return the differing rows of each day of `tables` that `wanted` keeps and that peel.

    `start` and `end` bound the window the days lie in.
    """
    named: dict[datetime, list[iblt.Entry]] = {}
    for day, t in tables.items():
        if wanted(day):
            entries = iblt.peel(iblt.subtract(t.source, t.reader), t.width)
            if entries:
                named[day] = entries
    every = [e for entries in named.values() for e in entries]
    if not every or len(every) > MAX_ROWS:
        return {}
    # Days do not overlap, so an instant a peel named belongs to one day.
    day_at = {e.micros: day for day, entries in named.items() for e in entries}
    fetch = peel.fetcher(sides, start, end)
    s_rows, r_rows = await fetch(peel.spans(every, 1), peel.spans(every, -1))
    s_by, r_by = _by_day(s_rows, day_at), _by_day(r_rows, day_at)
    found: Found = {}
    for day, entries in named.items():
        s_sel = peel.select(s_by.get(day, []), entries, 1)
        r_sel = peel.select(r_by.get(day, []), entries, -1)
        if s_sel is not None and r_sel is not None:
            found[day] = (s_sel, r_sel)
    return found


def _by_day(rows: list[RowHash], day_at: Mapping[int, datetime]) -> dict[datetime, list[RowHash]]:
    """Return fetched rows by the day whose digests named their instant."""
    out: dict[datetime, list[RowHash]] = {}
    for r in rows:
        day = day_at.get(epoch_micros(r.event_time))
        if day is not None:
            out.setdefault(day, []).append(r)
    return out
