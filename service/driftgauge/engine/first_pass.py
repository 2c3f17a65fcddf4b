"""The first pass: both sides' day buckets, and what each differing day keeps for later."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from driftgauge.core.aggregate import Aggregate
from driftgauge.encoding import iblt
from driftgauge.engine.result import needs_drill
from driftgauge.engine.sides import FIRST_PASS_SLOT, Sides, utc
from driftgauge.stores.base import BucketDigest, DigestPass, SlotPass


@dataclass(frozen=True)
class DaySlots:
    """A day's slots from the first pass, per side (None: that side must be asked)."""

    source: list[BucketDigest] | None
    reader: list[BucketDigest] | None
    origin: datetime
    """Where the first pass aligned its slots (the window's start)."""

    def usable(self, day_start: datetime) -> bool:
        """Return True when some side has slots aligned the way a query from day_start is."""
        aligned = (utc(day_start) - utc(self.origin)) % timedelta(seconds=FIRST_PASS_SLOT)
        return (self.source is not None or self.reader is not None) and not aligned


@dataclass(frozen=True)
class DayTables:
    """A differing day's difference digests, per side, and their sub-table width."""

    source: iblt.Table
    reader: iblt.Table
    width: int
    scan: str = "the first pass"
    """The scan that built them, as a strategy's reason names it."""


@dataclass(frozen=True)
class Days:
    """Both sides' day buckets by UTC start, and the slots or digests of the differing days."""

    source: dict[datetime, BucketDigest]
    reader: dict[datetime, BucketDigest]
    slots: dict[datetime, DaySlots]
    tables: dict[datetime, DayTables]


async def first_pass(
    sides: Sides,
    window_start: datetime,
    window_end: datetime,
    *,
    with_slots: bool,
    digest_width: int | None,
) -> Days:
    """Scan the window once per side: day buckets, with difference digests or slots.

    Only the differing days' digests or slots are kept: those of the days that agree go
    when this returns, not after the last day is judged.
    """
    if digest_width is not None and sides.digests():
        width = digest_width
        src_dp, rdr_dp = await sides.both(lambda s: s.digest_pass(window_start, window_end, width))
        src_by = {utc(b.start): b for b in src_dp.days}
        rdr_by = {utc(b.start): b for b in rdr_dp.days}
        tables = _tables_of(differing_days(src_by, rdr_by), src_dp, rdr_dp, width)
        return Days(src_by, rdr_by, {}, tables)
    (src_fp, src_has), (rdr_fp, rdr_has) = await sides.both(
        lambda s: s.first_pass(window_start, window_end, with_slots)
    )
    src_by = {utc(b.start): b for b in src_fp.days}
    rdr_by = {utc(b.start): b for b in rdr_fp.days}
    slots = _differing_slots(src_fp, src_has, rdr_fp, rdr_has, src_by, rdr_by, window_start)
    return Days(src_by, rdr_by, slots, {})


def _tables_of(
    days: list[datetime], src: DigestPass, rdr: DigestPass, width: int
) -> dict[datetime, DayTables]:
    """Keep difference digests of `days` only (a side without one there holds no rows)."""
    s_days = {utc(k): v for k, v in src.tables.items()}
    r_days = {utc(k): v for k, v in rdr.tables.items()}
    return {day: DayTables(s_days.get(day, {}), r_days.get(day, {}), width) for day in days}


def differing_days(
    src_by: Mapping[datetime, BucketDigest], rdr_by: Mapping[datetime, BucketDigest]
) -> list[datetime]:
    """Return the days whose first-pass buckets need a drill-down."""
    out = []
    for day in src_by.keys() | rdr_by.keys():
        s, r = src_by.get(day), rdr_by.get(day)
        if needs_drill(s.agg if s else Aggregate(), r.agg if r else Aggregate()):
            out.append(day)
    return out


def _differing_slots(
    src: SlotPass,
    src_has: bool,
    rdr: SlotPass,
    rdr_has: bool,
    src_by: Mapping[datetime, BucketDigest],
    rdr_by: Mapping[datetime, BucketDigest],
    origin: datetime,
) -> dict[datetime, DaySlots]:
    """Keep first-pass slots only for days that differ, so memory follows the drift."""
    if not (src_has or rdr_has):
        return {}
    s_days = {utc(k): k for k in src.slots}
    r_days = {utc(k): k for k in rdr.slots}
    # A side that scanned with slots but has none for the day holds no rows there.
    return {
        day: DaySlots(
            (src.slots[s_days[day]] if day in s_days else []) if src_has else None,
            (rdr.slots[r_days[day]] if day in r_days else []) if rdr_has else None,
            origin,
        )
        for day in differing_days(src_by, rdr_by)
    }
