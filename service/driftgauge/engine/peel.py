"""Find a day's differing rows from both sides' difference digests, then fetch only them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from driftgauge.core.clock import MICROSECOND
from driftgauge.encoding import iblt
from driftgauge.encoding.digest import epoch_micros, from_epoch_micros
from driftgauge.engine.plan import merge_ranges
from driftgauge.engine.sides import Counted, Sides
from driftgauge.engine.tasks import all_or_none
from driftgauge.stores.base import RowHash

Ranges = list[tuple[datetime, datetime]]
Fetch = Callable[[Ranges, Ranges], Awaitable[tuple[list[RowHash], list[RowHash]]]]
"""Fetch the source's rows in the first sub-ranges and the reader's in the second."""
Again = Callable[[iblt.Table, int], Awaitable[tuple[iblt.Table, iblt.Table, int] | None]]
"""Given a subtracted table that did not peel and its width: both sides' wider tables, or None."""


def spans(entries: Sequence[iblt.Entry], sign: int) -> Ranges:
    """Return the one-microsecond sub-ranges holding one side's differing rows."""
    times = {from_epoch_micros(e.micros) for e in entries if e.sign == sign}
    return merge_ranges([(t, t + MICROSECOND) for t in times])


def select(
    rows: Sequence[RowHash], entries: Sequence[iblt.Entry], sign: int
) -> list[RowHash] | None:
    """Return the fetched rows the digests named on one side; None unless each was found once.

    Other rows in the same microsecond are dropped: they are equal on both sides, or the
    digests would have named them.
    """
    want = Counter((e.row_hash, e.micros) for e in entries if e.sign == sign)
    out = []
    for r in rows:
        at = (r.row_hash, epoch_micros(r.event_time))
        if want[at] > 0:
            want[at] -= 1
            out.append(r)
    return out if not +want else None


async def differing_rows(
    source: iblt.Table, reader: iblt.Table, width: int, fetch: Fetch, again: Again | None = None
) -> tuple[list[RowHash], list[RowHash]] | None:
    """Return each side's rows that differ, or None when the digests cannot say (fall back).

    None when the subtracted table does not peel to zero or to nothing (nor do the tables
    `again` returns for it, when given), or when the rows at the named event times are
    not exactly the rows the digests named.
    """
    diff = iblt.subtract(source, reader)
    entries = iblt.peel(diff, width)
    if entries is None and again is not None:
        wider = await again(diff, width)
        if wider is not None:
            entries = iblt.peel(iblt.subtract(wider[0], wider[1]), wider[2])
    if not entries:
        return None  # no peel, or digests alike while the day's aggregates differ
    s_rows, r_rows = await fetch(spans(entries, 1), spans(entries, -1))
    s_sel, r_sel = select(s_rows, entries, 1), select(r_rows, entries, -1)
    if s_sel is None or r_sel is None:
        return None
    return s_sel, r_sel


def fetcher(sides: Sides, start: datetime, end: datetime) -> Fetch:
    """Return the fetch of both sides' rows at the instants a peel named, within [start, end)."""

    async def fetch(s_spans: Ranges, r_spans: Ranges) -> tuple[list[RowHash], list[RowHash]]:
        async def one(side: Counted, spans: Ranges) -> list[RowHash]:
            out: list[RowHash] = []
            if spans:
                await side.rows_into(start, end, None, spans, out.append)
            return out

        s_rows, r_rows = await all_or_none(one(sides.source, s_spans), one(sides.reader, r_spans))
        return s_rows, r_rows

    return fetch
