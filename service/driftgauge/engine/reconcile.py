"""Reconcile a source against a reader view: day buckets, drilled down only where they differ."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import datetime

from driftgauge.config.frozen import Check
from driftgauge.core.errors import DriftgaugeError, StoreError
from driftgauge.engine import early, plan
from driftgauge.engine.first_pass import Days, differing_days, first_pass
from driftgauge.engine.judge import DayInputs, Rows, judge_day
from driftgauge.engine.peel_all import peeled_days
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.engine.second_pass import second_pass
from driftgauge.engine.sides import FIRST_PASS_SLOT, Sides, utc
from driftgauge.engine.strategy import DAYS_ONLY, FirstPass
from driftgauge.engine.tasks import all_or_none
from driftgauge.stores.base import StoreAdapter

Progress = Callable[[int, int], None]
# Day buckets drilled at once; each holds a few queries open per side.
DAY_CONCURRENCY = 4


async def reconcile(
    check: Check,
    source: StoreAdapter,
    reader: StoreAdapter,
    window_start: datetime,
    window_end: datetime,
    *,
    now: datetime,
    sample_keys: int = 100,
    ledger_excluded: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    first: FirstPass = DAYS_ONLY,
) -> RunResult:
    """Return the per-day verdict for [window_start, window_end); store errors set `error`.

    `first` is how the window is scanned first and what a differing day gets then (see
    engine.strategy.FirstPass; jobs.first_pass plans it from the stored verdicts).
    """
    result = RunResult(
        check.name, window_start, window_end, started_at=now, row_hash=check.row_hash
    )
    result.first_pass = first.describe()
    if check.reader.row_hash != check.row_hash:
        # Digests of two different hashes differ on every row: refuse, never report drift.
        result.error = (
            f"the source hashes rows with {check.row_hash}, the reader with "
            f"{check.reader.row_hash}; a check's sides must use one row hash"
        )
        return result
    sides = Sides.of(check, source, reader)
    try:
        starts = plan.day_starts(window_start, window_end, check.timezone)
        with_slots = _with_slots(check, first, window_start, len(starts))
        # The drifted days' scans need nothing from the first pass: they run beside it.
        ahead = first.rescan and first.width is None and not with_slots and sides.digests()
        ends = {s: plan.next_day(s, check.timezone) for s in starts}
        # A day still settling is not judged, so it is not scanned early either.
        settled = [s for s in starts if ends[s] <= now - check.settle]
        drift = (first.day_drift or {}) if ahead else {}
        async with early.started(sides, settled, ends, drift) as scans:
            days = await first_pass(
                sides, window_start, window_end, with_slots=with_slots, digest_width=first.width
            )
            differing = differing_days(days.source, days.reader)
            rescan = first.rescan and plan.few_days(len(differing), len(starts))
            end_of = {utc(s): ends[s] for s in settled}
            if first.rescan and not rescan and not days.tables and sides.digests():
                # Many days differ: one scan of them for their digests, not one a day.
                wanted = sorted(d for d in differing if d in end_of and _alone(days, d))
                days = await second_pass(sides, days, wanted, end_of, first.day_drift or {})

            def peelable(day: datetime) -> bool:
                """A judged day whose keys appear once a side (see judge_day)."""
                return day in end_of and _alone(days, day)

            found = await peeled_days(sides, days.tables, peelable, window_start, window_end)

            def inputs(start: datetime) -> DayInputs:
                """What the first pass and the early scans hold for one day."""
                day = utc(start)
                drift = (first.day_drift or {}).get(day)
                return _inputs(days, day, rescan, drift, scans.get(day), found.get(day))

            result.buckets = await _judge_days(
                check, sides, starts, inputs, now, sample_keys, ledger_excluded or {}, progress
            )
    except DriftgaugeError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        result.failed_store = exc.store if isinstance(exc, StoreError) else None
        result.buckets = []
    _count(result, sides)
    return result


async def _judge_days(
    check: Check,
    sides: Sides,
    starts: list[datetime],
    inputs: Callable[[datetime], DayInputs],
    now: datetime,
    sample_keys: int,
    ledger_excluded: Mapping[str, str],
    progress: Progress | None,
) -> list[BucketResult]:
    """Judge every day, DAY_CONCURRENCY at once, reporting progress as each is done."""
    done = 0
    sem = asyncio.Semaphore(DAY_CONCURRENCY)

    async def one(start: datetime) -> BucketResult:
        nonlocal done
        async with sem:
            bucket = await judge_day(
                check, sides, start, inputs(start), now, sample_keys, ledger_excluded
            )
        done += 1
        if progress is not None:
            progress(done, len(starts))
        return bucket

    return await all_or_none(*(one(s) for s in starts))


def _with_slots(check: Check, first: FirstPass, window_start: datetime, days: int) -> bool:
    """Return True when the first pass asks for slots: planned, aligned and bounded."""
    # Bounded: slots of up to slot_first_pass_days days are held until judged. Slots
    # aligned on a window start off the minute would not line up with a day's own.
    on_minute = utc(window_start).timestamp() % FIRST_PASS_SLOT == 0
    return first.slots and on_minute and days <= check.drilldown.slot_first_pass_days


def _inputs(
    days: Days,
    day: datetime,
    rescan: bool,
    drift: plan.StoredDrift | None,
    scanned: asyncio.Task[early.Early] | None,
    found: Rows,
) -> DayInputs:
    """Return what the first pass, the early scans and the peel hold for one day (UTC)."""
    return DayInputs(
        days.source.get(day),
        days.reader.get(day),
        days.slots.get(day),
        days.tables.get(day),
        rescan,
        drift,
        scanned,
        found,
    )


def _count(result: RunResult, sides: Sides) -> None:
    """Record what the run cost each side: queries, rows fetched and scanned, seconds."""
    result.queries = sides.source.queries + sides.reader.queries
    result.rows_fetched = sides.source.rows + sides.reader.rows
    result.rows_scanned = sides.source.scanned + sides.reader.scanned
    result.source_seconds = sides.source.seconds
    result.reader_seconds = sides.reader.seconds


def _alone(days: Days, day: datetime) -> bool:
    """Return True when no key of the day appears twice on a side (it can be peeled)."""
    s, r = days.source.get(day), days.reader.get(day)
    return not any(b is not None and b.agg.has_duplicates for b in (s, r))
