"""Judge one day bucket: settling, else peel or drill its differences, then the verdict."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from driftgauge.config.frozen import Check
from driftgauge.core.aggregate import Aggregate
from driftgauge.engine import early, explain, peel, plan, resize
from driftgauge.engine.drill import Fetched, Taken, drill_day, join_day
from driftgauge.engine.first_pass import DaySlots, DayTables
from driftgauge.engine.join import LeafDiff
from driftgauge.engine.result import BucketResult, KeyDiff, Node, needs_drill, sort_key
from driftgauge.engine.sides import Sides
from driftgauge.engine.verdict import judge
from driftgauge.stores.base import BucketDigest, DigestPass, RowHash

Rows = tuple[list[RowHash], list[RowHash]] | None
"""A day's peeled rows, source and reader (None: not peeled)."""


@dataclass(frozen=True)
class DayInputs:
    """What a day's judging starts from: both sides' first-pass buckets and what the
    planner's scans already brought for it."""

    source: BucketDigest | None
    reader: BucketDigest | None
    slots: DaySlots | None = None
    tables: DayTables | None = None
    rescan: bool = False
    """Scan the day alone for its difference digests when the first pass brought none."""
    drift: plan.StoredDrift | None = None
    """What its last verdict said of its drift: it sizes that scan and may narrow it."""
    scanned: asyncio.Task[early.Early] | None = None
    """That scan, when it was started with the first pass (engine.early)."""
    found: Rows = None
    """The day's differing rows, when engine.peel_all already peeled `tables`."""


async def judge_day(
    check: Check,
    sides: Sides,
    start: datetime,
    day: DayInputs,
    now: datetime,
    sample_keys: int,
    ledger_excluded: Mapping[str, str],
) -> BucketResult:
    """Return the day's bucket, its differences found and classified, and its status.

    With `day.rescan`, a differing day the first pass brought no digests or slots for
    is scanned alone for its difference digests (when both sides build them) before it
    is drilled down (see DayInputs).
    """
    src, rdr = day.source, day.reader
    s_agg = src.agg if src else Aggregate()
    r_agg = rdr.agg if rdr else Aggregate()
    rule_excluded = dict(src.excluded) if src else {}
    end = plan.next_day(start, check.timezone)
    bucket = BucketResult(
        start=start,
        status="ok",
        expected=s_agg.count + sum(rule_excluded.values()),
        visible=r_agg.distinct_keys,
        excluded=rule_excluded,
        source=s_agg,
        reader=r_agg,
    )
    if end > now - check.settle:
        bucket.status = "settling"
        bucket.strategy, bucket.strategy_reason = "aggregates", "still settling: not scanned"
        return bucket
    if needs_drill(s_agg, r_agg):
        unexplained = await _find_differences(
            check, sides, start, end, day, bucket, sample_keys, ledger_excluded
        )
    else:
        unexplained = []
        bucket.strategy, bucket.strategy_reason = "aggregates", "both sides' day aggregates agree"
    judge(bucket, check.tolerance)
    if unexplained:
        # Counts the found rows do not add up to are not a verdict, whichever way they lean.
        bucket.status = "error"
        bucket.reasons = explain.reasons(unexplained) + bucket.reasons
    return bucket


async def _find_differences(
    check: Check,
    sides: Sides,
    start: datetime,
    end: datetime,
    day: DayInputs,
    bucket: BucketResult,
    sample_keys: int,
    ledger_excluded: Mapping[str, str],
) -> list[str]:
    """Find a differing day's rows (peeled, else drilled down) into `bucket`.

    Returns what the found rows do not explain of the day's aggregates.
    """
    slots, tables = day.slots, day.tables
    rescan, drift, scanned, found = day.rescan, day.drift, day.scanned, day.found
    s_agg, r_agg = bucket.source, bucket.reader
    # Only a day where no key repeats is peeled: the copies check needs every key held
    # twice, and a key held twice alike on both sides cancels out of the digests.
    alone = not (s_agg.has_duplicates or r_agg.has_duplicates)
    peeled: Rows = found if alone and tables is not None else None
    taken = Taken("digests", _digests_reason(tables))
    if rescan and alone and tables is None and slots is None and sides.digests():
        tables, peeled = await _day_tables(
            sides, start, end, s_agg, r_agg, drift or plan.StoredDrift(0), scanned
        )
        taken = Taken("day_digests", _rescan_reason(drift) + _width(tables))
    if peeled is None and tables and alone:
        peeled = await _peel_day(sides, start, end, tables, s_agg, r_agg)
    tree: list[Node] = []
    if peeled is not None:
        diff = join_day(s_agg, r_agg, Fetched.of(*peeled), ledger_excluded)
        bucket.drift_hours = _hours_of([*peeled[0], *peeled[1]], check.timezone)
    else:
        tree, diff, drilled = await drill_day(
            sides, start, end, s_agg, r_agg, ledger_excluded, slots
        )
        # Why digests did not judge it comes first: that is the planner's miss.
        missed = _no_peel(alone, tables, sides)
        taken = Taken(drilled.strategy, f"{missed}; {drilled.reason}" if missed else drilled.reason)
    bucket.strategy, bucket.strategy_reason = taken
    bucket.tree = tree
    bucket.missing, bucket.extra = diff.missing, diff.extra
    bucket.mismatched, bucket.duplicates = diff.mismatched, diff.duplicates
    bucket.ledger_excluded = dict(diff.excluded)
    for reason, n in diff.excluded.items():
        bucket.excluded[reason] = bucket.excluded.get(reason, 0) + n
    bucket.samples = _sample(diff, sample_keys)
    problem = explain.mismatch("day", s_agg, r_agg, diff.found)
    unexplained = ([problem] if problem else []) + diff.unexplained
    totals = explain.totals_mismatch("day", s_agg, r_agg, diff.found)
    if totals:
        unexplained.append(totals)
    return unexplained


async def _peel_day(
    sides: Sides,
    start: datetime,
    end: datetime,
    tables: DayTables,
    s_agg: Aggregate,
    r_agg: Aggregate,
) -> Rows:
    """Return each side's differing rows from the day's digests; None: drill down instead.

    A table too small to peel has the day scanned once more, wider (see engine.resize).
    """
    requery = _requery(sides, start, end)
    again = resize.again(start, s_agg, r_agg, requery, early.widest_of(sides))
    fetch = peel.fetcher(sides, start, end)
    return await peel.differing_rows(tables.source, tables.reader, tables.width, fetch, again)


async def _day_tables(
    sides: Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    drift: plan.StoredDrift,
    scanned: asyncio.Task[early.Early] | None,
) -> tuple[DayTables | None, Rows]:
    """Return a differing day's difference digests from a scan of that day alone.

    Sized for the rows the day differed by when last judged (0: unknown, then wide
    enough for its table to estimate them): a table that does not peel says how much
    wider the next scan must be (see engine.resize). A dense day sized from its verdict
    is one scan, not a small one and a wide one (10M rows, 5% of 3 days: see
    bench/RESULTS.md). Drift that sat in a few hours has only those hours scanned, as
    long as the rest of the day is alike on both sides (see resize.scan_part); else the
    whole day is. `scanned` is the day's scan started with the first pass (engine.early):
    used, with the rows it peeled, when the pass's aggregates vouch for it.
    """
    width = early.width_of(sides, drift)
    whole = _requery(sides, start, end)
    if scanned is not None:
        got = await scanned
        tables = got.tables(start, s_agg, r_agg)
        if tables is not None or got.whole:
            return tables, got.rows if tables is not None else None
        # The drift left the hours it sat in: the whole day, as below.
        again = await resize.scan(start, s_agg, r_agg, whole, got.width)
        return (None if again is None else DayTables(again[0], again[1], got.width)), None
    lo, hi = plan.cover(start, end, drift.hours)
    part = None
    if (lo, hi) != (start, end):
        part = await resize.scan_part(start, s_agg, r_agg, _requery(sides, lo, hi), width)
    if part is None:
        part = await resize.scan(start, s_agg, r_agg, whole, width)
    return (None if part is None else DayTables(part[0], part[1], width)), None


def _requery(sides: Sides, lo: datetime, hi: datetime) -> resize.Requery:
    """Return a scan of [lo, hi) on both sides for its difference digests of a width."""

    async def requery(width: int) -> tuple[DigestPass, DigestPass]:
        return await sides.both(lambda s: s.digest_pass(lo, hi, width))

    return requery


def _hours_of(rows: Sequence[RowHash], tz: ZoneInfo) -> list[datetime]:
    """Return the UTC start of each local hour of `tz` that holds one of `rows`."""
    starts = set()
    for r in rows:
        local = r.event_time.astimezone(tz)
        # replace() keeps `fold`, so the second 01:00 hour of a day that falls back stays it.
        starts.add(local.replace(minute=0, second=0, microsecond=0).astimezone(UTC))
    return sorted(starts)


def _sample(diff: LeafDiff, per_kind: int) -> list[KeyDiff]:
    """Return up to `per_kind` differing keys of each kind, in key order."""
    taken: dict[str, int] = {}
    out = []
    for k in sorted(diff.keys, key=sort_key):
        if taken.get(k.kind, 0) < per_kind:
            taken[k.kind] = taken.get(k.kind, 0) + 1
            out.append(k)
    return out


def _digests_reason(tables: DayTables | None) -> str:
    """Return which scan's difference digests judged a day, and their width."""
    scan = tables.scan if tables is not None else "the first pass"
    return f"{scan}'s difference digests peeled{_width(tables)}"


def _width(tables: DayTables | None) -> str:
    """Return the digests' width as a clause of a strategy's reason ("" without tables)."""
    return "" if tables is None else f" ({tables.width} cells a sub-table)"


def _rescan_reason(drift: plan.StoredDrift | None) -> str:
    """Return why a differing day was scanned alone, and what sized that scan."""
    if drift is not None and drift.rows:
        return (
            "scanned alone for its difference digests, "
            f"sized for the {drift.rows} rows it last differed by"
        )
    return "scanned alone for its difference digests, sized to estimate its drift"


def _no_peel(alone: bool, tables: DayTables | None, sides: Sides) -> str:
    """Return why a differing day was not judged by digests ("" when none were planned)."""
    if not alone:
        return "a key repeats on a side, so digests cannot peel it"
    if tables is not None:
        return "its difference digests did not peel"
    if not sides.digests():
        return "the stores build no difference digests"
    return ""
