"""Reconcile a source against a reader view: day buckets, drilled down only where they differ."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from driftgauge.config.runtime import Check
from driftgauge.engine import plan
from driftgauge.engine.join import LeafDiff, join_rows
from driftgauge.engine.result import BucketResult, KeyDiff, Node, RunResult, needs_drill
from driftgauge.engine.verdict import judge
from driftgauge.errors import DriftgaugeError
from driftgauge.stores.base import (
    Aggregate,
    BucketDigest,
    Granularity,
    RowHash,
    StoreAdapter,
)

Progress = Callable[[int, int], None]
# Day buckets drilled at once; each holds a few queries open per side.
DAY_CONCURRENCY = 4
T = TypeVar("T")


class _Counted:
    """Wrap an adapter to count round trips and fetched rows for the run's report."""

    def __init__(self, inner: StoreAdapter) -> None:
        self.inner = inner
        self.queries = 0
        self.rows = 0
        self.seconds = 0.0
        """Time spent waiting on this store, summed over concurrent calls."""

    async def buckets(self, start: datetime, end: datetime,
                      granularity: Granularity) -> list[BucketDigest]:
        self.queries += 1
        t0 = time.perf_counter()
        try:
            return await self.inner.bucket_digests(start, end, granularity)
        finally:
            self.seconds += time.perf_counter() - t0

    async def prefixes(self, start: datetime, end: datetime, depth: int,
                       within: Sequence[str] | None) -> dict[str, Aggregate]:
        self.queries += 1
        t0 = time.perf_counter()
        try:
            return await self.inner.prefix_digests(start, end, depth, within)
        finally:
            self.seconds += time.perf_counter() - t0

    async def slots(self, start: datetime, end: datetime, seconds: int) -> list[BucketDigest]:
        self.queries += 1
        t0 = time.perf_counter()
        try:
            # Only asked of days where no key repeats: keys need not be counted again.
            return await self.inner.slot_digests(start, end, seconds, distinct=False)
        finally:
            self.seconds += time.perf_counter() - t0

    async def rows_of(self, start: datetime, end: datetime, prefixes: Sequence[str] | None,
                      ranges: Sequence[tuple[datetime, datetime]] | None = None,
                      ) -> list[RowHash]:
        self.queries += 1
        t0 = time.perf_counter()
        try:
            rows = (self.inner.iter_rows(start, end, prefixes) if ranges is None
                    else self.inner.iter_rows(start, end, prefixes, ranges=ranges))
            out = [row async for row in rows]
        finally:
            self.seconds += time.perf_counter() - t0
        self.rows += len(out)
        return out



@dataclass
class _Sides:
    source: _Counted
    reader: _Counted

    async def both(self, fn: Callable[[_Counted], Awaitable[T]]) -> tuple[T, T]:
        """Run the same request on both sides concurrently."""
        s, r = await asyncio.gather(fn(self.source), fn(self.reader))
        return s, r


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


async def reconcile(check: Check, source: StoreAdapter, reader: StoreAdapter,
                    window_start: datetime, window_end: datetime, *, now: datetime,
                    sample_keys: int = 100, ledger_excluded: Mapping[str, str] | None = None,
                    progress: Progress | None = None) -> RunResult:
    """Return the per-day verdict for [window_start, window_end); store errors set `error`."""
    result = RunResult(check.name, window_start, window_end, started_at=now)
    sides = _Sides(_Counted(source), _Counted(reader))
    try:
        src_days, rdr_days = await sides.both(
            lambda s: s.buckets(window_start, window_end, "day"))
        src_by = {_utc(b.start): b for b in src_days}
        rdr_by = {_utc(b.start): b for b in rdr_days}
        starts = plan.day_starts(window_start, window_end, check.timezone)
        done = 0
        sem = asyncio.Semaphore(DAY_CONCURRENCY)

        async def one(start: datetime) -> BucketResult:
            nonlocal done
            async with sem:
                bucket = await _judge_day(check, sides, start, src_by.get(_utc(start)),
                                          rdr_by.get(_utc(start)), now, sample_keys,
                                          ledger_excluded or {})
            done += 1
            if progress is not None:
                progress(done, len(starts))
            return bucket

        result.buckets = list(await asyncio.gather(*(one(s) for s in starts)))
    except DriftgaugeError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        result.buckets = []
    result.queries = sides.source.queries + sides.reader.queries
    result.rows_fetched = sides.source.rows + sides.reader.rows
    result.source_seconds = sides.source.seconds
    result.reader_seconds = sides.reader.seconds
    return result


async def _judge_day(check: Check, sides: _Sides, start: datetime, src: BucketDigest | None,
                     rdr: BucketDigest | None, now: datetime, sample_keys: int,
                     ledger_excluded: Mapping[str, str]) -> BucketResult:
    s_agg = src.agg if src else Aggregate()
    r_agg = rdr.agg if rdr else Aggregate()
    rule_excluded = dict(src.excluded) if src else {}
    end = plan.next_day(start, check.timezone)
    bucket = BucketResult(
        start=start, status="ok", expected=s_agg.count + sum(rule_excluded.values()),
        visible=r_agg.distinct_keys, excluded=rule_excluded, source=s_agg, reader=r_agg)
    if end > now - check.settle:
        bucket.status = "settling"
        return bucket
    if needs_drill(s_agg, r_agg):
        tree, diff = await _drill_day(check, sides, start, end, s_agg, r_agg, ledger_excluded)
        bucket.tree = tree
        bucket.missing, bucket.extra = diff.missing, diff.extra
        bucket.mismatched, bucket.duplicates = diff.mismatched, diff.duplicates
        bucket.ledger_excluded = dict(diff.excluded)
        for reason, n in diff.excluded.items():
            bucket.excluded[reason] = bucket.excluded.get(reason, 0) + n
        bucket.samples = _sample(diff, sample_keys)
    judge(bucket, check.tolerance)
    return bucket


def _sample(diff: LeafDiff, per_kind: int) -> list[KeyDiff]:
    taken: dict[str, int] = {}
    out = []
    for k in sorted(diff.keys, key=lambda k: k.key):
        if taken.get(k.kind, 0) < per_kind:
            taken[k.kind] = taken.get(k.kind, 0) + 1
            out.append(k)
    return out


async def _drill_day(check: Check, sides: _Sides, start: datetime, end: datetime,
                     s_agg: Aggregate, r_agg: Aggregate,
                     ledger_excluded: Mapping[str, str]) -> tuple[list[Node], LeafDiff]:
    """Return the day's drill-down tree and the classified differences."""
    dd = check.drilldown
    if plan.fits_leaf(s_agg, r_agg, dd) or plan.is_dense(s_agg, r_agg, dd):
        # Dense drift or a small day: its rows cost less than walking the levels.
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, None))
        return _hours_from_rows(check, s_rows, r_rows), join_rows(s_rows, r_rows,
                                                                    ledger_excluded)
    if not (s_agg.has_duplicates or r_agg.has_duplicates):
        return await _drill_slots(check, sides, start, end, s_agg, r_agg, ledger_excluded)
    # A key held twice may sit in two slots; hours and prefixes keep its copies together.
    s_hours, r_hours = await sides.both(lambda s: s.buckets(start, end, "hour"))
    hours = _pair_hours(check, s_hours, r_hours)
    differing = [h for h in hours if h.differs]
    diff = LeafDiff()
    est = plan.estimate_diffs(len(differing), max(len(hours), 1))
    if len(differing) > max(2, len(hours) // 4) and not _all_leaves(differing, check):
        # Drift spread over many hours: one prefix split over the whole day beats one per hour.
        nodes, found = await _drill_range(check, sides, start, end, s_agg, r_agg, 0, None,
                                          est, ledger_excluded)
        diff.add(found)
        return hours + nodes, diff

    async def per_hour(node: Node) -> LeafDiff:
        h_start = datetime.fromisoformat(node.label)
        h_end = h_start + timedelta(hours=1)
        node.children, found = await _drill_range(check, sides, h_start, h_end, node.source,
                                                  node.reader, 0, None, 1.0, ledger_excluded)
        node.fetched = not node.children
        return found

    for found in await asyncio.gather(*(per_hour(h) for h in differing)):
        diff.add(found)
    return hours, diff


async def _drill_slots(check: Check, sides: _Sides, start: datetime, end: datetime,
                       s_agg: Aggregate, r_agg: Aggregate,
                       ledger_excluded: Mapping[str, str]) -> tuple[list[Node], LeafDiff]:
    """Localise drift by short time slots, then fetch only the differing slots' rows.

    One slot query per side finds every differing slot of the day, however the drift is
    spread; the rows of all small differing slots come back in one ranged fetch, which a
    time index serves without hashing the rest of the day. A slot still too big (rows
    that share a timestamp) is split by key-hash prefix.
    """
    dd = check.drilldown
    seconds = plan.slot_seconds(max(s_agg.count, r_agg.count))
    s_sl, r_sl = await sides.both(lambda s: s.slots(start, end, seconds))
    s_by = {_utc(b.start): b.agg for b in s_sl}
    r_by = {_utc(b.start): b.agg for b in r_sl}
    slots = [(k, s_by.get(k, Aggregate()), r_by.get(k, Aggregate()))
             for k in sorted(s_by.keys() | r_by.keys())]
    bad = [sl for sl in slots if needs_drill(sl[1], sl[2])]
    small = [sl for sl in bad if plan.fits_leaf(sl[1], sl[2], dd)]
    big = [sl for sl in bad if not plan.fits_leaf(sl[1], sl[2], dd)]
    step = timedelta(seconds=seconds)
    diff = LeafDiff()
    if small:
        ranges = plan.merge_ranges([(k, k + step) for k, _, _ in small])
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, None, ranges))
        diff.add(join_rows(s_rows, r_rows, ledger_excluded))
    hours = _hours_from_slots(check, slots)
    by_label = {h.label: h for h in hours}
    for k, s_a, r_a in big:
        nodes, found = await _drill_range(check, sides, k, k + step, s_a, r_a, 0, None, 1.0,
                                          ledger_excluded)
        diff.add(found)
        label = plan.hour_of(k, check.timezone).isoformat()
        by_label[label].children.extend(nodes)
    fetched_hours = {plan.hour_of(k, check.timezone).isoformat() for k, _, _ in small}
    big_hours = {plan.hour_of(k, check.timezone).isoformat() for k, _, _ in big}
    for h in hours:
        h.fetched = h.label in fetched_hours and h.label not in big_hours
    return hours, diff


def _hours_from_slots(check: Check,
                      slots: list[tuple[datetime, Aggregate, Aggregate]]) -> list[Node]:
    """Sum slots into hour nodes (exact: the day holds no key twice, so keys add up)."""
    acc: dict[str, tuple[Aggregate, Aggregate]] = {}
    for k, s_a, r_a in slots:
        label = plan.hour_of(k, check.timezone).isoformat()
        s0, r0 = acc.get(label, (Aggregate(), Aggregate()))
        acc[label] = (plan.add(s0, s_a), plan.add(r0, r_a))
    return [Node("hour", label, s_a, r_a) for label, (s_a, r_a) in sorted(acc.items())]


def _all_leaves(nodes: list[Node], check: Check) -> bool:
    total = sum(max(n.source.count, n.reader.count) for n in nodes)
    return total <= check.drilldown.leaf_rows


async def _drill_range(check: Check, sides: _Sides, start: datetime, end: datetime,
                       s_agg: Aggregate, r_agg: Aggregate, depth: int,
                       within: Sequence[str] | None, est_diffs: float,
                       ledger_excluded: Mapping[str, str]) -> tuple[list[Node], LeafDiff]:
    """Split [start, end) by key-hash prefix until leaves are small, then join their rows."""
    dd = check.drilldown
    if plan.fits_leaf(s_agg, r_agg, dd) or depth >= dd.max_depth:
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, within))
        return [], join_rows(s_rows, r_rows, ledger_excluded)
    rows = max(s_agg.count, r_agg.count)
    new_depth = depth + plan.prefix_step(rows, est_diffs, dd, depth)
    s_pre, r_pre = await sides.both(lambda s: s.prefixes(start, end, new_depth, within))
    nodes = [Node("prefix", p, s_pre.get(p, Aggregate()), r_pre.get(p, Aggregate()))
             for p in sorted(s_pre.keys() | r_pre.keys())]
    bad = [n for n in nodes if n.differs]
    small = [n for n in bad if plan.fits_leaf(n.source, n.reader, dd) or new_depth >= dd.max_depth]
    big = [n for n in bad if n not in small]
    diff = LeafDiff()
    if small:
        # Every small differing prefix of this range in one round trip per side.
        labels = [n.label for n in small]
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, labels))
        diff.add(join_rows(s_rows, r_rows, ledger_excluded))
        for n in small:
            n.fetched = True
    for n in big:
        n.children, found = await _drill_range(check, sides, start, end, n.source, n.reader,
                                               new_depth, [n.label], 1.0, ledger_excluded)
        diff.add(found)
    # Only the differing prefixes are worth keeping in the stored tree.
    return bad, diff


def _pair_hours(check: Check, s_hours: list[BucketDigest],
                r_hours: list[BucketDigest]) -> list[Node]:
    s_by = {_utc(b.start): b.agg for b in s_hours}
    r_by = {_utc(b.start): b.agg for b in r_hours}
    return [Node("hour", k.astimezone(check.timezone).isoformat(),
                 s_by.get(k, Aggregate()), r_by.get(k, Aggregate()))
            for k in sorted(s_by.keys() | r_by.keys())]


def _hours_from_rows(check: Check, s_rows: list[RowHash], r_rows: list[RowHash]) -> list[Node]:
    """Build hour nodes from fetched rows, so a dense day still has a drill-down tree."""
    def by_hour(rows: list[RowHash]) -> dict[datetime, Aggregate]:
        acc: dict[datetime, tuple[int, set[str], int]] = {}
        for r in rows:
            h = _utc(plan.hour_of(r.event_time, check.timezone))
            c, keys, d = acc.get(h, (0, set(), 0))
            keys.add(r.key)
            acc[h] = (c + 1, keys, (d + r.row_hash) % (1 << 64))
        return {h: Aggregate(c, len(k), d) for h, (c, k, d) in acc.items()}

    s_by, r_by = by_hour(s_rows), by_hour(r_rows)
    return [Node("hour", k.astimezone(check.timezone).isoformat(), s_by.get(k, Aggregate()),
                 r_by.get(k, Aggregate()), fetched=True)
            for k in sorted(s_by.keys() | r_by.keys())]


async def compare_hours(check: Check, source: StoreAdapter, reader: StoreAdapter,
                        day_start: datetime, day_end: datetime) -> list[Node]:
    """Return both sides' hour aggregates for one day, live."""
    sides = _Sides(_Counted(source), _Counted(reader))
    s_hours, r_hours = await sides.both(lambda s: s.buckets(day_start, day_end, "hour"))
    return _pair_hours(check, s_hours, r_hours)


async def compare_prefixes(check: Check, source: StoreAdapter, reader: StoreAdapter,
                           start: datetime, end: datetime, depth: int,
                           within: Sequence[str] | None = None) -> list[Node]:
    """Return both sides' aggregates per key-hash prefix of [start, end), live."""
    sides = _Sides(_Counted(source), _Counted(reader))
    s_pre, r_pre = await sides.both(lambda s: s.prefixes(start, end, depth, within))
    return [Node("prefix", p, s_pre.get(p, Aggregate()), r_pre.get(p, Aggregate()))
            for p in sorted(s_pre.keys() | r_pre.keys())]
