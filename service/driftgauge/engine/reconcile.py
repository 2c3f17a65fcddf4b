"""Reconcile a source against a reader view: day buckets, drilled down only where they differ."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TypeVar
from zoneinfo import ZoneInfo

from driftgauge import observe
from driftgauge.config.runtime import Check
from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.errors import DriftgaugeError, StoreError
from driftgauge.encoding import iblt
from driftgauge.engine import explain, peel, plan
from driftgauge.engine.join import Delta, LeafDiff, deltas, join_rows
from driftgauge.engine.result import (
    BucketResult,
    KeyDiff,
    Node,
    RunResult,
    needs_drill,
    sort_key,
)
from driftgauge.engine.tasks import all_or_none
from driftgauge.engine.verdict import judge
from driftgauge.stores.base import (
    BucketDigest,
    DigestFirstPass,
    DigestPass,
    FirstPass,
    Granularity,
    RowHash,
    SlotFirstPass,
    StoreAdapter,
)

Progress = Callable[[int, int], None]
# Day buckets drilled at once; each holds a few queries open per side.
DAY_CONCURRENCY = 4
# Slot length of the first pass: divides every hour and lines up with any whole-minute
# day start, so the slots of a day agree whichever side computed them.
FIRST_PASS_SLOT = 60
T = TypeVar("T")
_Rows = tuple[list[RowHash], list[RowHash]] | None


class _Counted:
    """Wrap an adapter to count round trips and fetched rows for the run's report and /metrics."""

    def __init__(self, inner: StoreAdapter, store: str) -> None:
        self.inner = inner
        self.store = store
        """The configured store's name, for the process's store-call metrics."""
        self.queries = 0
        self.rows = 0
        self.scanned = 0
        """Rows the store digested or returned for this run (see _scan)."""
        self.seconds = 0.0
        """Time spent waiting on this store, summed over concurrent calls."""

    @contextmanager
    def _timed(self, operation: str) -> Iterator[None]:
        """Count one call, add its wait to `seconds` and record it for /metrics."""
        self.queries += 1
        t0 = time.perf_counter()
        try:
            with observe.store_call(self.store, operation):
                yield
        finally:
            self.seconds += time.perf_counter() - t0

    def _scan(self, operation: str, rows: int) -> None:
        """Count rows a call digested (excluded ones too: the store read them) or returned."""
        self.scanned += rows
        observe.ROWS_SCANNED.add((self.store, operation), rows)

    async def buckets(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        with self._timed("digests"):
            out = await self.inner.bucket_digests(start, end, granularity)
        self._scan("digests", _rows_in(out))
        return out

    async def first_pass(
        self, start: datetime, end: datetime, with_slots: bool
    ) -> tuple[FirstPass, bool]:
        """Return the day buckets, with their slots when asked and the store can."""
        with self._timed("digests"):
            if with_slots and isinstance(self.inner, SlotFirstPass):
                got = await self.inner.day_and_slot_digests(start, end, FIRST_PASS_SLOT), True
            else:
                got = FirstPass(await self.inner.bucket_digests(start, end, "day"), {}), False
        # The slots come from the same scan as the days: their rows are not read again.
        self._scan("digests", _rows_in(got[0].days))
        return got

    async def digest_pass(self, start: datetime, end: datetime, width: int) -> DigestPass:
        """Return the day buckets and their difference digests."""
        assert isinstance(self.inner, DigestFirstPass)
        with self._timed("digests"):
            got = await self.inner.day_and_cell_digests(start, end, width)
        # The digests come from the same scan as the days: their rows count once.
        self._scan("digests", _rows_in(got.days))
        return got

    async def prefixes(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None
    ) -> dict[str, Aggregate]:
        with self._timed("prefixes"):
            out = await self.inner.prefix_digests(start, end, depth, within)
        self._scan("prefixes", sum(a.count for a in out.values()))
        return out

    async def slots(self, start: datetime, end: datetime, seconds: int) -> list[BucketDigest]:
        with self._timed("slots"):
            # Only asked of days where no key repeats: keys need not be counted again.
            out = await self.inner.slot_digests(start, end, seconds, distinct=False)
        self._scan("slots", _rows_in(out))
        return out

    async def rows_of(
        self,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None,
        ranges: Sequence[tuple[datetime, datetime]] | None = None,
    ) -> list[RowHash]:
        with self._timed("rows"):
            rows = (
                self.inner.iter_rows(start, end, prefixes)
                if ranges is None
                else self.inner.iter_rows(start, end, prefixes, ranges=ranges)
            )
            out = [row async for row in rows]
        self.rows += len(out)
        self._scan("rows", len(out))
        return out


def _rows_in(buckets: Sequence[BucketDigest]) -> int:
    """Return the rows a list of bucket digests covers, excluded rows included."""
    return sum(b.agg.count + sum(b.excluded.values()) for b in buckets)


@dataclass(frozen=True)
class _DaySlots:
    """A day's slots from the first pass, per side (None: that side must be asked)."""

    source: list[BucketDigest] | None
    reader: list[BucketDigest] | None
    origin: datetime
    """Where the first pass aligned its slots (the window's start)."""

    def usable(self, day_start: datetime) -> bool:
        """Return True when some side has slots aligned the way a query from day_start is."""
        aligned = (_utc(day_start) - _utc(self.origin)) % timedelta(seconds=FIRST_PASS_SLOT)
        return (self.source is not None or self.reader is not None) and not aligned


@dataclass
class _Sides:
    """Both sides of one check, each counting its calls."""

    check: Check
    source: _Counted
    reader: _Counted

    @classmethod
    def of(cls, check: Check, source: StoreAdapter, reader: StoreAdapter) -> _Sides:
        """Return the check's two adapters, counted under their configured stores' names."""
        return cls(
            check,
            _Counted(source, check.source.store.name),
            _Counted(reader, check.reader.store.name),
        )

    async def both(self, fn: Callable[[_Counted], Awaitable[T]]) -> tuple[T, T]:
        """Run the same request on both sides concurrently."""
        s, r = await all_or_none(fn(self.source), fn(self.reader))
        return s, r

    def digests(self) -> bool:
        """Return True when both sides return difference digests in their first pass."""
        return isinstance(self.source.inner, DigestFirstPass) and isinstance(
            self.reader.inner, DigestFirstPass
        )


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


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
    slots_first: bool = False,
    digest_width: int | None = None,
) -> RunResult:
    """Return the per-day verdict for [window_start, window_end); store errors set `error`.

    `slots_first` asks stores that can for each day's slots in the first scan: about 20%
    more for that scan, and no second hashing pass over a day that differs. Worth it when
    drift is likely (see runner.expects_drift), not on a healthy check.

    `digest_width` asks, when both sides can, for each day's difference digest of that
    many cells per sub-table instead (see encoding.iblt): a day that differs is then
    peeled and only its differing rows fetched; a day that does not peel is drilled down.
    """
    result = RunResult(
        check.name, window_start, window_end, started_at=now, row_hash=check.row_hash
    )
    if check.reader.row_hash != check.row_hash:
        # Digests of two different hashes differ on every row: refuse, never report drift.
        result.error = (
            f"the source hashes rows with {check.row_hash}, the reader with "
            f"{check.reader.row_hash}; a check's sides must use one row hash"
        )
        return result
    sides = _Sides.of(check, source, reader)
    try:
        starts = plan.day_starts(window_start, window_end, check.timezone)
        # Bounded: slots of up to slot_first_pass_days days are held until judged. Slots
        # aligned on a window start off the minute would not line up with a day's own.
        on_minute = _utc(window_start).timestamp() % FIRST_PASS_SLOT == 0
        with_slots = (
            slots_first and on_minute and len(starts) <= check.drilldown.slot_first_pass_days
        )
        day_slots: dict[datetime, _DaySlots] = {}
        day_tables: dict[datetime, _DayTables] = {}
        if digest_width is not None and sides.digests():
            width = digest_width
            src_dp, rdr_dp = await sides.both(
                lambda s: s.digest_pass(window_start, window_end, width)
            )
            src_by = {_utc(b.start): b for b in src_dp.days}
            rdr_by = {_utc(b.start): b for b in rdr_dp.days}
            day_tables = _tables_of(_differing_days(src_by, rdr_by), src_dp, rdr_dp, width)
            del src_dp, rdr_dp  # the tables of days that agree go now
        else:
            (src_fp, src_has), (rdr_fp, rdr_has) = await sides.both(
                lambda s: s.first_pass(window_start, window_end, with_slots)
            )
            src_by = {_utc(b.start): b for b in src_fp.days}
            rdr_by = {_utc(b.start): b for b in rdr_fp.days}
            day_slots = _differing_slots(
                src_fp, src_has, rdr_fp, rdr_has, src_by, rdr_by, window_start
            )
            del src_fp, rdr_fp  # the slots of days that agree go now, not after the last day
        done = 0
        sem = asyncio.Semaphore(DAY_CONCURRENCY)

        async def one(start: datetime) -> BucketResult:
            nonlocal done
            async with sem:
                bucket = await _judge_day(
                    check,
                    sides,
                    start,
                    src_by.get(_utc(start)),
                    rdr_by.get(_utc(start)),
                    now,
                    sample_keys,
                    ledger_excluded or {},
                    day_slots.get(_utc(start)),
                    day_tables.get(_utc(start)),
                )
            done += 1
            if progress is not None:
                progress(done, len(starts))
            return bucket

        result.buckets = await all_or_none(*(one(s) for s in starts))
    except DriftgaugeError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        result.failed_store = exc.store if isinstance(exc, StoreError) else None
        result.buckets = []
    result.queries = sides.source.queries + sides.reader.queries
    result.rows_fetched = sides.source.rows + sides.reader.rows
    result.rows_scanned = sides.source.scanned + sides.reader.scanned
    result.source_seconds = sides.source.seconds
    result.reader_seconds = sides.reader.seconds
    return result


@dataclass(frozen=True)
class _DayTables:
    """A differing day's difference digests, per side, and their sub-table width."""

    source: iblt.Table
    reader: iblt.Table
    width: int


def _tables_of(
    days: list[datetime], src: DigestPass, rdr: DigestPass, width: int
) -> dict[datetime, _DayTables]:
    """Keep difference digests of `days` only (a side without one there holds no rows)."""
    s_days = {_utc(k): v for k, v in src.tables.items()}
    r_days = {_utc(k): v for k, v in rdr.tables.items()}
    return {day: _DayTables(s_days.get(day, {}), r_days.get(day, {}), width) for day in days}


def _differing_days(
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
    src: FirstPass,
    src_has: bool,
    rdr: FirstPass,
    rdr_has: bool,
    src_by: Mapping[datetime, BucketDigest],
    rdr_by: Mapping[datetime, BucketDigest],
    origin: datetime,
) -> dict[datetime, _DaySlots]:
    """Keep first-pass slots only for days that differ, so memory follows the drift."""
    if not (src_has or rdr_has):
        return {}
    s_days = {_utc(k): k for k in src.slots}
    r_days = {_utc(k): k for k in rdr.slots}
    # A side that scanned with slots but has none for the day holds no rows there.
    return {
        day: _DaySlots(
            (src.slots[s_days[day]] if day in s_days else []) if src_has else None,
            (rdr.slots[r_days[day]] if day in r_days else []) if rdr_has else None,
            origin,
        )
        for day in _differing_days(src_by, rdr_by)
    }


async def _judge_day(
    check: Check,
    sides: _Sides,
    start: datetime,
    src: BucketDigest | None,
    rdr: BucketDigest | None,
    now: datetime,
    sample_keys: int,
    ledger_excluded: Mapping[str, str],
    slots: _DaySlots | None = None,
    tables: _DayTables | None = None,
) -> BucketResult:
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
        return bucket
    if needs_drill(s_agg, r_agg):
        # Only a day where no key repeats is peeled: the copies check needs every key held
        # twice, and a key held twice alike on both sides cancels out of the digests.
        alone = not (s_agg.has_duplicates or r_agg.has_duplicates)
        peeled = await _peel_day(sides, start, end, tables) if tables and alone else None
        tree: list[Node] = []
        if peeled is not None:
            diff = _join_day(s_agg, r_agg, _Fetched(*peeled), ledger_excluded)
            bucket.drift_hours = _hours_of([*peeled[0], *peeled[1]], check.timezone)
        else:
            tree, diff = await _drill_day(sides, start, end, s_agg, r_agg, ledger_excluded, slots)
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
    else:
        unexplained = []
    judge(bucket, check.tolerance)
    if unexplained:
        # Counts the found rows do not add up to are not a verdict, whichever way they lean.
        bucket.status = "error"
        bucket.reasons = explain.reasons(unexplained) + bucket.reasons
    return bucket


async def _peel_day(sides: _Sides, start: datetime, end: datetime, tables: _DayTables) -> _Rows:
    """Return each side's differing rows from the day's digests; None: drill down instead."""

    async def fetch(
        s_spans: peel.Ranges, r_spans: peel.Ranges
    ) -> tuple[list[RowHash], list[RowHash]]:
        async def one(side: _Counted, spans: peel.Ranges) -> list[RowHash]:
            return await side.rows_of(start, end, None, spans) if spans else []

        s_rows, r_rows = await all_or_none(one(sides.source, s_spans), one(sides.reader, r_spans))
        return s_rows, r_rows

    return await peel.differing_rows(tables.source, tables.reader, tables.width, fetch)


def _hours_of(rows: Sequence[RowHash], tz: ZoneInfo) -> list[datetime]:
    """Return the UTC start of each local hour of `tz` that holds one of `rows`."""
    starts = set()
    for r in rows:
        local = r.event_time.astimezone(tz)
        # replace() keeps `fold`, so the second 01:00 hour of a day that falls back stays it.
        starts.add(local.replace(minute=0, second=0, microsecond=0).astimezone(UTC))
    return sorted(starts)


def _sample(diff: LeafDiff, per_kind: int) -> list[KeyDiff]:
    taken: dict[str, int] = {}
    out = []
    for k in sorted(diff.keys, key=sort_key):
        if taken.get(k.kind, 0) < per_kind:
            taken[k.kind] = taken.get(k.kind, 0) + 1
            out.append(k)
    return out


@dataclass
class _Fetched:
    """Rows fetched below a day, per side, joined once for the whole day.

    Joining each leaf on its own would miss a key whose rows sit in two leaves (a row
    moved between a fetched slot and a slot split by prefix): the day join sees them meet.
    """

    source: list[RowHash] = field(default_factory=list)
    reader: list[RowHash] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    """Nodes whose fetched rows do not add up to how their aggregates differ."""

    def add(self, other: _Fetched) -> None:
        """Take another node's rows and problems."""
        self.source.extend(other.source)
        self.reader.extend(other.reader)
        self.unexplained.extend(other.unexplained)

    def delta(self) -> Delta:
        """Return source minus reader over every fetched row."""
        return deltas(self.source, self.reader, lambda _: None).get(None, Delta())

    def check(self, where: str, s_agg: Aggregate, r_agg: Aggregate, got: Delta) -> None:
        """Note `where` when its fetched rows differ otherwise than its aggregates do."""
        problem = explain.mismatch(where, s_agg, r_agg, got)
        if problem:
            self.unexplained.append(problem)


async def _drill_day(
    sides: _Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    ledger_excluded: Mapping[str, str],
    slots: _DaySlots | None = None,
) -> tuple[list[Node], LeafDiff]:
    """Return the day's drill-down tree and the classified differences."""
    check = sides.check
    dd = check.drilldown
    if plan.fits_leaf(s_agg, r_agg, dd) or plan.is_dense(s_agg, r_agg, dd):
        # Dense drift or a small day: its rows cost less than walking the levels.
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, None))
        hours = _hours_from_rows(check, s_rows, r_rows)
        if check.measures:
            # Rows carry no measure values: the stores' hour buckets give each hour's totals.
            s_hours, r_hours = await sides.both(lambda s: s.buckets(start, end, "hour"))
            hours = _pair_hours(check, s_hours, r_hours)
            for h in hours:
                h.fetched = True
        return hours, _join_day(s_agg, r_agg, _Fetched(s_rows, r_rows), ledger_excluded)
    if not (s_agg.has_duplicates or r_agg.has_duplicates):
        tree, fetched = await _drill_slots(sides, start, end, s_agg, r_agg, slots)
        return tree, _join_day(s_agg, r_agg, fetched, ledger_excluded)
    # A key held twice may sit in two hours or slots; only key-hash prefixes of the whole
    # day keep all its copies together. The hours are asked for the tree only.
    s_hours, r_hours = await sides.both(lambda s: s.buckets(start, end, "hour"))
    hours = _pair_hours(check, s_hours, r_hours)
    est = plan.estimate_diffs(sum(h.differs for h in hours), max(len(hours), 1))
    nodes, fetched = await _drill_range(sides, start, end, s_agg, r_agg, 0, None, est)
    return hours + nodes, _join_day(s_agg, r_agg, fetched, ledger_excluded)


def _join_day(
    s_agg: Aggregate, r_agg: Aggregate, fetched: _Fetched, ledger_excluded: Mapping[str, str]
) -> LeafDiff:
    """Join every row fetched for the day at once; check the copies found add up."""
    diff = join_rows(fetched.source, fetched.reader, ledger_excluded)
    diff.unexplained.extend(fetched.unexplained)
    # Each drill path fetches every key held twice, so the copies found must be all the
    # day's copies: if not, a key's copies were split or a store answered inconsistently.
    for side, agg, found in (
        ("source", s_agg, diff.source_copies),
        ("reader", r_agg, diff.reader_copies),
    ):
        want = agg.count - agg.distinct_keys
        if want != found:
            diff.unexplained.append(
                f"day: the {side} holds {want} extra copies of keys; the rows fetched hold {found}"
            )
    return diff


async def _drill_slots(
    sides: _Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    cached: _DaySlots | None = None,
) -> tuple[list[Node], _Fetched]:
    """Localise drift by short time slots, then fetch only the differing slots' rows.

    One slot query per side finds every differing slot of the day, however the drift is
    spread; the rows of all small differing slots come back in one ranged fetch, which a
    time index serves without hashing the rest of the day. A slot still too big (rows
    that share a timestamp) is split by key-hash prefix. Slots the first pass already
    returned are used as they are; only a side without them is asked.
    """
    check = sides.check
    dd = check.drilldown
    if cached is not None and cached.usable(start):
        seconds = FIRST_PASS_SLOT

        async def slots_of(side: _Counted, have: list[BucketDigest] | None) -> list[BucketDigest]:
            return have if have is not None else await side.slots(start, end, seconds)

        s_sl, r_sl = await all_or_none(
            slots_of(sides.source, cached.source), slots_of(sides.reader, cached.reader)
        )
    else:
        seconds = plan.slot_seconds(max(s_agg.count, r_agg.count))
        s_sl, r_sl = await sides.both(lambda s: s.slots(start, end, seconds))
    s_by = {_utc(b.start): b.agg for b in s_sl}
    r_by = {_utc(b.start): b.agg for b in r_sl}
    slots = [
        (k, s_by.get(k, Aggregate()), r_by.get(k, Aggregate()))
        for k in sorted(s_by.keys() | r_by.keys())
    ]
    bad = [sl for sl in slots if needs_drill(sl[1], sl[2])]
    small = [sl for sl in bad if plan.fits_leaf(sl[1], sl[2], dd)]
    big = [sl for sl in bad if not plan.fits_leaf(sl[1], sl[2], dd)]
    step = timedelta(seconds=seconds)
    fetched = _Fetched()
    day = _utc(start)

    def hour_of(k: datetime) -> datetime:
        return day + (k - day) // buckets.HOUR * buckets.HOUR

    found_in: dict[datetime, Delta] = {}
    if small:
        ranges = plan.merge_ranges([(k, k + step) for k, _, _ in small])
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, None, ranges))
        fetched.add(_Fetched(s_rows, r_rows))
        for h, d in deltas(s_rows, r_rows, lambda r: hour_of(_utc(r.event_time))).items():
            if isinstance(h, datetime):
                found_in[h] = d
    hours = _hours_from_slots(check, day, slots)
    by_start = {_utc(datetime.fromisoformat(h.label)): h for h in hours}
    for k, s_a, r_a in big:
        nodes, below = await _drill_range(sides, k, k + step, s_a, r_a, 0, None, 1.0)
        fetched.add(below)
        by_start[hour_of(k)].children.extend(nodes)
        found_in.setdefault(hour_of(k), Delta()).add(below.delta())
    for h_start, h in by_start.items():
        fetched.check(f"hour {h.label}", h.source, h.reader, found_in.get(h_start, Delta()))
    fetched_hours = {hour_of(k) for k, _, _ in small}
    big_hours = {hour_of(k) for k, _, _ in big}
    for h_start, h in by_start.items():
        h.fetched = h_start in fetched_hours and h_start not in big_hours
    return hours, fetched


def _hours_from_slots(
    check: Check, day: datetime, slots: list[tuple[datetime, Aggregate, Aggregate]]
) -> list[Node]:
    """Sum slots into hour nodes (exact: the day holds no key twice, so keys add up).

    Slots are aligned on the day's start and divide an hour, and hours are whole hours
    of elapsed time from that start, so each slot lies in one hour: plain arithmetic,
    no zone lookup per slot.
    """
    acc: dict[datetime, list[int]] = {}
    for k, s_a, r_a in slots:
        t = acc.setdefault(day + (k - day) // buckets.HOUR * buckets.HOUR, [0, 0, 0, 0, 0, 0])
        t[0] += s_a.count
        t[1] += s_a.distinct_keys
        t[2] += s_a.digest
        t[3] += r_a.count
        t[4] += r_a.distinct_keys
        t[5] += r_a.digest
    mod = 1 << 64
    s_tot, r_tot = _hour_totals(day, slots, 1), _hour_totals(day, slots, 2)
    return [
        Node(
            "hour",
            buckets.label(h, check.timezone),
            Aggregate(t[0], t[1], t[2] % mod, s_tot.get(h) if s_tot else None),
            Aggregate(t[3], t[4], t[5] % mod, r_tot.get(h) if r_tot else None),
        )
        for h, t in sorted(acc.items())
    ]


def _hour_totals(
    day: datetime, slots: list[tuple[datetime, Aggregate, Aggregate]], side: int
) -> dict[datetime, dict[str, Decimal]] | None:
    """Sum one side's slot totals per hour; None when some slot was not summed."""
    out: dict[datetime, dict[str, Decimal]] = {}
    for k, s_a, r_a in slots:
        agg = s_a if side == 1 else r_a
        hour = out.setdefault(day + (k - day) // buckets.HOUR * buckets.HOUR, {})
        if agg.count == 0 and agg.measures is None:
            continue  # the side has no rows in this slot
        if agg.measures is None:
            return None
        for name, total in agg.measures.items():
            hour[name] = hour.get(name, Decimal(0)) + total
    return out if any(out.values()) else None


async def _drill_range(
    sides: _Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    depth: int,
    within: Sequence[str] | None,
    est_diffs: float,
) -> tuple[list[Node], _Fetched]:
    """Split [start, end) by key-hash prefix until leaves are small, then fetch their rows."""
    check = sides.check
    dd = check.drilldown
    where = f"[{buckets.label(start, check.timezone)}, {buckets.label(end, check.timezone)})"
    if within:
        where = f"prefix {','.join(within)} of {where}"
    if plan.fits_leaf(s_agg, r_agg, dd) or depth >= dd.max_depth:
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, within))
        leaf = _Fetched(s_rows, r_rows)
        leaf.check(where, s_agg, r_agg, leaf.delta())
        return [], leaf
    rows = max(s_agg.count, r_agg.count)
    new_depth = depth + plan.prefix_step(rows, est_diffs, dd, depth)
    s_pre, r_pre = await sides.both(lambda s: s.prefixes(start, end, new_depth, within))
    nodes = _prefix_nodes(s_pre, r_pre)
    bad = [n for n in nodes if n.differs]
    small = [n for n in bad if plan.fits_leaf(n.source, n.reader, dd) or new_depth >= dd.max_depth]
    big = [n for n in bad if n not in small]
    fetched = _Fetched()
    if small:
        # Every small differing prefix of this range in one round trip per side.
        labels = [n.label for n in small]
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, labels))
        fetched.add(_Fetched(s_rows, r_rows))
        by_prefix = deltas(s_rows, r_rows, lambda r: r.key_hash[:new_depth])
        for n in small:
            n.fetched = True
            fetched.check(
                f"prefix {n.label} of {where}", n.source, n.reader, by_prefix.get(n.label, Delta())
            )
    for n in big:
        n.children, below = await _drill_range(
            sides, start, end, n.source, n.reader, new_depth, [n.label], 1.0
        )
        fetched.add(below)
    # The prefixes split the range: what they fetched must be what the range differs by.
    if not fetched.unexplained:
        fetched.check(where, s_agg, r_agg, fetched.delta())
    # Only the differing prefixes are worth keeping in the stored tree.
    return bad, fetched


def _prefix_nodes(s_pre: Mapping[str, Aggregate], r_pre: Mapping[str, Aggregate]) -> list[Node]:
    """Pair both sides' prefix aggregates into nodes, a side without the prefix as empty."""
    return [
        Node("prefix", p, s_pre.get(p, Aggregate()), r_pre.get(p, Aggregate()))
        for p in sorted(s_pre.keys() | r_pre.keys())
    ]


def _hour_nodes(
    check: Check,
    s_by: Mapping[datetime, Aggregate],
    r_by: Mapping[datetime, Aggregate],
    *,
    fetched: bool = False,
) -> list[Node]:
    """Pair both sides' hour aggregates into nodes, a side without the hour as empty."""
    return [
        Node(
            "hour",
            buckets.label(k, check.timezone),
            s_by.get(k, Aggregate()),
            r_by.get(k, Aggregate()),
            fetched=fetched,
        )
        for k in sorted(s_by.keys() | r_by.keys())
    ]


def _pair_hours(
    check: Check, s_hours: list[BucketDigest], r_hours: list[BucketDigest]
) -> list[Node]:
    s_by = {_utc(b.start): b.agg for b in s_hours}
    r_by = {_utc(b.start): b.agg for b in r_hours}
    return _hour_nodes(check, s_by, r_by)


def _hours_from_rows(check: Check, s_rows: list[RowHash], r_rows: list[RowHash]) -> list[Node]:
    """Build hour nodes from fetched rows, so a dense day still has a drill-down tree."""

    def by_hour(rows: list[RowHash]) -> dict[datetime, Aggregate]:
        acc: dict[datetime, tuple[int, set[str], int]] = {}
        for r in rows:
            h = buckets.hour_start(r.event_time, check.timezone)
            c, keys, d = acc.get(h, (0, set(), 0))
            keys.add(r.key_hash)
            acc[h] = (c + 1, keys, (d + r.row_hash) % (1 << 64))
        return {h: Aggregate(c, len(k), d) for h, (c, k, d) in acc.items()}

    return _hour_nodes(check, by_hour(s_rows), by_hour(r_rows), fetched=True)


async def compare_hours(
    check: Check, source: StoreAdapter, reader: StoreAdapter, day_start: datetime, day_end: datetime
) -> list[Node]:
    """Return both sides' hour aggregates for one day, live."""
    sides = _Sides.of(check, source, reader)
    s_hours, r_hours = await sides.both(lambda s: s.buckets(day_start, day_end, "hour"))
    return _pair_hours(check, s_hours, r_hours)


async def compare_prefixes(
    check: Check,
    source: StoreAdapter,
    reader: StoreAdapter,
    start: datetime,
    end: datetime,
    depth: int,
    within: Sequence[str] | None = None,
) -> list[Node]:
    """Return both sides' aggregates per key-hash prefix of [start, end), live."""
    sides = _Sides.of(check, source, reader)
    s_pre, r_pre = await sides.both(lambda s: s.prefixes(start, end, depth, within))
    return _prefix_nodes(s_pre, r_pre)
