"""Scan a day once more when its difference digests did not peel, at a width they estimate.

A run without a stored verdict cannot know how much a day drifts before its first scan;
the table that came back too small says (encoding.sizing.estimate). One more indexed
scan of that day per side, at a width sized from it, costs far less than drilling the
day down. The wider tables are used only when the day's aggregates in that scan are the
ones the day is judged on: a day that changed in between falls back to the drill-down.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from driftgauge.core.aggregate import Aggregate, minus
from driftgauge.encoding import iblt, sizing
from driftgauge.engine import peel
from driftgauge.stores.base import DigestPass

Requery = Callable[[int], Awaitable[tuple[DigestPass, DigestPass]]]
"""Scan the day again on both sides: day buckets and difference digests of a width."""


def again(
    day: datetime, source: Aggregate, reader: Aggregate, requery: Requery, widest: int
) -> peel.Again:
    """Return the second try of a day whose first scan gave these aggregates.

    `widest` is the widest table both sides build for one day (see iblt.widest).
    """

    async def wider(diff: iblt.Table, width: int) -> tuple[iblt.Table, iblt.Table, int] | None:
        to = sizing.retry_width(diff, width, widest)
        if to is None:
            return None  # no table the stores build would peel: drill down
        tables = await scan(day, source, reader, requery, to)
        return None if tables is None else (*tables, to)

    return wider


async def scan(
    day: datetime, source: Aggregate, reader: Aggregate, requery: Requery, width: int
) -> tuple[iblt.Table, iblt.Table] | None:
    """Return the day's tables from one more scan at `width`; None when the day changed."""
    return whole_tables(day, source, reader, *(await requery(width)))


def whole_tables(
    day: datetime, source: Aggregate, reader: Aggregate, s_dp: DigestPass, r_dp: DigestPass
) -> tuple[iblt.Table, iblt.Table] | None:
    """Return the day's tables from a scan of the whole day; None when the day changed.

    The day's verdict rests on the aggregates `source` and `reader`: tables from a scan
    that saw other rows would peel another day's difference.
    """
    if _agg(s_dp, day) != source or _agg(r_dp, day) != reader:
        return None  # the day changed since the scan its verdict rests on
    return table_of(s_dp, day), table_of(r_dp, day)


async def scan_part(
    day: datetime, source: Aggregate, reader: Aggregate, requery: Requery, width: int
) -> tuple[iblt.Table, iblt.Table] | None:
    """Return the tables of a part of the day from one scan of that part at `width`.

    `requery` scans only the part; see part_tables.
    """
    return part_tables(day, source, reader, *(await requery(width)))


def part_tables(
    day: datetime, source: Aggregate, reader: Aggregate, s_dp: DigestPass, r_dp: DigestPass
) -> tuple[iblt.Table, iblt.Table] | None:
    """Return the tables of a part of the day from a scan of that part alone.

    They stand for the whole day only when the rest of the day, the day's aggregates
    less the part's, is alike on both sides: then every row that differs lies in the
    part. None otherwise (drift moved out of the part, or the day changed since the scan
    its verdict rests on): scan the whole day instead.
    """
    s_rest, r_rest = minus(source, _agg(s_dp, day)), minus(reader, _agg(r_dp, day))
    if s_rest is None or r_rest is None or not s_rest.same_as(r_rest):
        return None
    return table_of(s_dp, day), table_of(r_dp, day)


def _agg(dp: DigestPass, day: datetime) -> Aggregate:
    """Return the day's aggregate in a digest pass; empty when the side has no rows there."""
    at = day.astimezone(UTC)
    return next((b.agg for b in dp.days if b.start.astimezone(UTC) == at), Aggregate())


def table_of(dp: DigestPass, day: datetime) -> iblt.Table:
    """Return the day's difference digest in a digest pass; empty without rows there."""
    at = day.astimezone(UTC)
    return next((t for k, t in dp.tables.items() if k.astimezone(UTC) == at), {})
