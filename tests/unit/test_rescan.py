"""Drift stored in a few days: the first pass takes day aggregates only, and each day that
differs is scanned alone for its difference digests and peeled, not drilled down."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

from driftgauge.core.aggregate import Aggregate, minus
from driftgauge.core.errors import StoreError
from driftgauge.encoding import iblt, sizing
from driftgauge.engine.plan import RESCAN_SHARE, StoredDrift, cover
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.base import Granularity, RowHash
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import BASE, NOW, day_rows, key_of, make_check, row
from .test_first_run import DAYS, PER_DAY, _drifted

DRILLS = ("slots", "prefixes", "hours")
A = TypeVar("A", bound=MemoryAdapter)


WINDOW = DAYS * RESCAN_SHARE
"""The window's days: the drifted ones are then few enough to scan each alone."""


async def _run(
    source: MemoryAdapter,
    reader: MemoryAdapter,
    rescan: bool,
    days: int = WINDOW,
    drift: dict[datetime, StoredDrift] | None = None,
) -> RunResult:
    check = make_check(drilldown="{leaf_rows: 20}")
    end = BASE + timedelta(days=days)
    return await reconcile(
        check, source, reader, BASE, end, now=NOW, first=FirstPass(rescan=rescan, day_drift=drift)
    )


async def _run_drifted(
    source: Callable[[list[RowHash]], A], rescan: bool, **kw: Any
) -> tuple[RunResult, A]:
    """Run _drifted's rows, the source's through `source`, the reader's with digests."""
    src, rdr = _drifted()
    s_ad = source(src)
    return await _run(s_ad, DigestMemoryAdapter(rdr), rescan, **kw), s_ad


def _counts(b: BucketResult) -> tuple[object, ...]:
    return (b.status, b.missing, b.extra, b.mismatched, b.duplicates)


DRIFT = [("drift", PER_DAY, PER_DAY, PER_DAY, 0)] * DAYS


async def test_a_differing_day_is_scanned_alone_and_peeled() -> None:
    src, rdr = _drifted()
    s_ad, r_ad = DigestMemoryAdapter(src), DigestMemoryAdapter(rdr)
    result = await _run(s_ad, r_ad, rescan=True)
    assert result.error is None
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    assert all(b.status == "ok" for b in result.buckets[DAYS:])
    # Per side: the days-only first pass, then per day one digest scan and one fetch.
    assert s_ad.calls[0] == "buckets:day"
    width = f"days+cells:{sizing.ESTIMATE_WIDTH}"
    assert sorted(s_ad.calls[1:]) == sorted([width] * DAYS + ["rows"] * DAYS)
    assert not any(c.startswith(DRILLS) for c in s_ad.calls + r_ad.calls)
    assert all(b.tree == [] and b.drift_hours for b in result.buckets[:DAYS])
    assert result.rows_fetched == DAYS * 4 * PER_DAY  # the differing rows themselves


async def test_the_rows_a_day_differed_by_size_its_scan() -> None:
    # 4 x PER_DAY rows differ a day (a mismatch is two): sized for them, one scan peels.
    drift = {BASE + timedelta(days=d): StoredDrift(4 * PER_DAY) for d in range(DAYS)}
    result, s_ad = await _run_drifted(DigestMemoryAdapter, rescan=True, drift=drift)
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    sized = f"days+cells:{iblt.width_for(4 * PER_DAY)}"
    assert [c for c in s_ad.calls if c.startswith("days+cells")] == [sized] * DAYS
    assert all(b.tree == [] for b in result.buckets[:DAYS])


async def test_without_rescan_the_same_days_are_drilled_down_to_the_same_counts() -> None:
    result, s_ad = await _run_drifted(DigestMemoryAdapter, rescan=False)
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    assert any(c.startswith(DRILLS) for c in s_ad.calls)
    assert not any(c.startswith("days+cells") for c in s_ad.calls)


async def test_drift_on_more_days_than_a_few_takes_one_second_pass_not_a_scan_a_day() -> None:
    # Every day of the window differs: drift spread since the verdict that planned rescans.
    result, s_ad = await _run_drifted(DigestMemoryAdapter, rescan=True, days=DAYS)
    assert [_counts(b) for b in result.buckets] == DRIFT
    assert not any(c.startswith(DRILLS) for c in s_ad.calls)
    # The days are consecutive: one scan of them all, then one fetch of their rows.
    assert s_ad.calls == ["buckets:day", f"days+cells:{sizing.first_width(DAYS)}", "rows"]
    assert {b.strategy for b in result.buckets} == {"digests"}


class _Changing(DigestMemoryAdapter):
    """A reader that takes in one more row on the first day right after the first pass."""

    async def bucket_digests(self, start: datetime, end: datetime, granularity: Granularity) -> Any:
        got = await super().bucket_digests(start, end, granularity)
        self.rows.append(row("late", BASE + timedelta(hours=1)))
        return got


async def test_a_day_that_changed_before_its_scan_is_drilled_down_never_ok() -> None:
    src, rdr = _drifted()
    r_ad = _Changing(rdr)
    result = await _run(DigestMemoryAdapter(src), r_ad, rescan=True)
    assert result.error is None
    # The first day's scan saw one reader row more than the first pass: none of its
    # tables is used and that day alone falls back to the drill-down.
    assert [c for c in r_ad.calls if c.startswith("days+cells")] == [
        f"days+cells:{sizing.ESTIMATE_WIDTH}"
    ] * DAYS
    assert any(c.startswith(DRILLS) for c in r_ad.calls)
    first, *rest = result.buckets[:DAYS]
    assert first.status != "ok" and first.tree
    assert all(b.tree == [] and _counts(b) == DRIFT[0] for b in rest)


async def test_a_day_that_changed_before_the_second_pass_is_drilled_down_never_ok() -> None:
    src, rdr = _drifted()
    r_ad = _Changing(rdr)
    result = await _run(DigestMemoryAdapter(src), r_ad, rescan=True, days=DAYS)
    assert result.error is None
    # One second pass over every day; its first day saw a reader row the first pass did
    # not: that day's tables are not used, it is drilled down; the others peel.
    assert [c for c in r_ad.calls if c.startswith("days+cells")] == [
        f"days+cells:{sizing.first_width(DAYS)}"
    ]
    first, *rest = result.buckets
    assert first.status != "ok" and first.tree and first.strategy != "digests"
    assert all(b.tree == [] and _counts(b) == DRIFT[0] for b in rest)
    assert {b.strategy for b in rest} == {"digests"}


async def test_a_side_without_digests_is_drilled_down() -> None:
    result, s_ad = await _run_drifted(MemoryAdapter, rescan=True)
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    assert any(c.startswith(DRILLS) for c in s_ad.calls)


class _Ranges(DigestMemoryAdapter):
    """A digest adapter that records the range of every difference-digest scan."""

    def __init__(self, rows: list[Any]) -> None:
        super().__init__(rows)
        self.scans: list[tuple[datetime, datetime]] = []

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> Any:
        self.scans.append((start, end))
        return await super().day_and_cell_digests(start, end, width)


HOURS_DAY = 1
"""The day whose drift sits in a few hours (08:00-11:00) among WINDOW days."""


def _hours_drift(moved: bool = False) -> tuple[list[Any], list[Any]]:
    """Return a window of WINDOW days whose drift sits in three hours of one day.

    `moved`: one more key missing at 20:00, outside the hours the verdict stored.
    """
    src = [r for d in range(WINDOW) for r in day_rows(d, 240)]
    day = BASE + timedelta(days=HOURS_DAY)
    hours = (day + timedelta(hours=8), day + timedelta(hours=11))
    late = day + timedelta(hours=20)
    rdr = []
    for i, r in enumerate(src):
        inside = hours[0] <= r.event_time < hours[1]
        if (inside and i % 3 == 0) or (moved and r.event_time == late):
            continue  # missing
        rdr.append(row(key_of(r), r.event_time, "changed") if inside and i % 3 == 1 else r)
    rdr += [row(f"x{j}", hours[0] + timedelta(seconds=61 * j + 7)) for j in range(5)]
    return src, rdr


def _stored_hours() -> dict[datetime, StoredDrift]:
    day = BASE + timedelta(days=HOURS_DAY)
    hours = tuple(day + timedelta(hours=h) for h in (8, 9, 10))
    return {day: StoredDrift(40, hours)}


async def test_drift_stored_in_a_few_hours_has_only_those_hours_scanned() -> None:
    src, rdr = _hours_drift()
    s_ad, r_ad = _Ranges(src), _Ranges(rdr)
    result = await _run(s_ad, r_ad, rescan=True, drift=_stored_hours())
    assert result.error is None
    day = BASE + timedelta(days=HOURS_DAY)
    want = [
        ("drift", 10, 5, 10, 0) if d == HOURS_DAY else ("ok", 0, 0, 0, 0) for d in range(WINDOW)
    ]
    assert [_counts(b) for b in result.buckets] == want
    # One scan a side, of 08:00-11:00 alone, peeled; nothing drilled down.
    cover = [(day + timedelta(hours=8), day + timedelta(hours=11))]
    assert s_ad.scans == cover and r_ad.scans == cover
    assert not any(c.startswith(DRILLS) for c in s_ad.calls + r_ad.calls)
    assert result.buckets[HOURS_DAY].drift_hours == list(_stored_hours()[day].hours)


async def test_drift_that_left_its_stored_hours_has_the_whole_day_scanned() -> None:
    src, rdr = _hours_drift(moved=True)
    s_ad, r_ad = _Ranges(src), _Ranges(rdr)
    result = await _run(s_ad, r_ad, rescan=True, drift=_stored_hours())
    assert result.error is None
    # The rest of the day differs (the key missing at 20:00): the hours' tables would not
    # explain the day, so the whole day is scanned and peeled, and the key is counted.
    assert _counts(result.buckets[HOURS_DAY]) == ("drift", 11, 5, 10, 0)
    day = BASE + timedelta(days=HOURS_DAY)
    whole = (day, day + timedelta(days=1))
    assert s_ad.scans == [(day + timedelta(hours=8), day + timedelta(hours=11)), whole]
    assert not any(c.startswith(DRILLS) for c in s_ad.calls + r_ad.calls)


async def test_with_no_stored_hours_the_whole_day_is_scanned() -> None:
    src, rdr = _hours_drift()
    s_ad = _Ranges(src)
    day = BASE + timedelta(days=HOURS_DAY)
    result = await _run(s_ad, _Ranges(rdr), rescan=True, drift={day: StoredDrift(40)})
    assert _counts(result.buckets[HOURS_DAY]) == ("drift", 10, 5, 10, 0)
    assert s_ad.scans == [(day, day + timedelta(days=1))]


def test_the_cover_spans_the_stored_hours_or_else_the_whole_day() -> None:
    day, end = BASE, BASE + timedelta(days=1)
    h = [BASE + timedelta(hours=x) for x in range(24)]
    assert cover(day, end, []) == (day, end)
    assert cover(day, end, [h[9], h[3]]) == (h[3], h[10])
    assert cover(day, end, [h[23]]) == (h[23], end)
    # Spanning more than half the day: not worth a scan that may have to be repeated.
    assert cover(day, end, [h[0], h[12]]) == (day, end)
    assert cover(day, end, [h[0], h[11]]) == (day, h[12])
    # Hours of another day (a stored verdict of another zone or window) are ignored.
    assert cover(day, end, [end, day - timedelta(hours=1)]) == (day, end)
    assert cover(day, end, [end, h[5]]) == (h[5], h[6])


def test_the_rest_of_a_day_is_its_aggregate_less_a_part() -> None:
    whole = Aggregate(10, 10, 5, {"amount": Decimal("7.5")})
    part = Aggregate(4, 4, 9, {"amount": Decimal("2.5"), "fee": Decimal(1)})
    rest = minus(whole, part)
    assert rest == Aggregate(6, 6, (5 - 9) % (1 << 64), {"amount": Decimal(5), "fee": Decimal(-1)})
    assert minus(Aggregate(10, 9, 5), Aggregate(4, 4, 1)) is None  # a key repeats
    assert minus(Aggregate(10, 10, 5), Aggregate(4, 3, 1)) is None
    assert minus(Aggregate(3, 3, 5), Aggregate(4, 4, 1)) is None  # not a part of it
    assert minus(whole, Aggregate(4, 4, 1)) is None  # totals on one side only


class _Beside(DigestMemoryAdapter):
    """A source whose first pass ends only once a day's digest scan has begun beside it."""

    def __init__(self, rows: list[Any]) -> None:
        super().__init__(rows)
        self.scanning = asyncio.Event()

    async def bucket_digests(self, start: datetime, end: datetime, granularity: Granularity) -> Any:
        if end - start > timedelta(days=1):  # the first pass, not a day scan's own days
            await asyncio.wait_for(self.scanning.wait(), 5)
        return await super().bucket_digests(start, end, granularity)

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> Any:
        self.scanning.set()
        return await super().day_and_cell_digests(start, end, width)


def _stored_days() -> dict[datetime, StoredDrift]:
    return {BASE + timedelta(days=d): StoredDrift(4 * PER_DAY) for d in range(DAYS)}


async def test_the_drifted_days_are_scanned_beside_the_first_pass_not_after_it() -> None:
    # Scanned after the pass, the pass would wait for a scan that never begins: a timeout.
    result, s_ad = await _run_drifted(_Beside, rescan=True, drift=_stored_days())
    assert result.error is None
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    assert all(b.status == "ok" for b in result.buckets[DAYS:])
    assert [c for c in s_ad.calls if c.startswith("days+cells")] == [
        f"days+cells:{iblt.width_for(4 * PER_DAY)}"
    ] * DAYS
    assert not any(c.startswith(DRILLS) for c in s_ad.calls)


class _ChangedAfterScan(DigestMemoryAdapter):
    """A reader that takes in one more row on the first day after that day's early scan,
    before the first pass reads it."""

    def __init__(self, rows: list[Any]) -> None:
        super().__init__(rows)
        self.scanned = asyncio.Event()

    async def bucket_digests(self, start: datetime, end: datetime, granularity: Granularity) -> Any:
        if end - start > timedelta(days=1):
            await asyncio.wait_for(self.scanned.wait(), 5)
        return await super().bucket_digests(start, end, granularity)

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> Any:
        got = await super().day_and_cell_digests(start, end, width)
        if start == BASE:
            self.rows.append(row("late", BASE + timedelta(hours=1)))
            self.scanned.set()
        return got


async def test_a_day_that_changed_after_its_early_scan_is_drilled_down_never_ok() -> None:
    src, rdr = _drifted()
    r_ad = _ChangedAfterScan(rdr)
    result = await _run(DigestMemoryAdapter(src), r_ad, rescan=True, drift=_stored_days())
    assert result.error is None
    first, *rest = result.buckets[:DAYS]
    # The early scan saw one reader row fewer than the pass: its tables and the rows it
    # peeled are not used, and the day is drilled down, the late row counted as extra.
    assert first.status == "drift" and first.tree
    assert _counts(first) == ("drift", PER_DAY, PER_DAY + 1, PER_DAY, 0)
    assert all(b.tree == [] and _counts(b) == DRIFT[0] for b in rest)
    assert len([c for c in r_ad.calls if c.startswith("days+cells")]) == DAYS


class _FailingScan(DigestMemoryAdapter):
    """A source whose digest scan of one day fails."""

    def __init__(self, rows: list[Any], day: datetime) -> None:
        super().__init__(rows)
        self.day = day

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> Any:
        if start == self.day:
            raise StoreError("src", "the scan of a day failed")
        return await super().day_and_cell_digests(start, end, width)


async def test_a_failed_early_scan_fails_the_run_only_when_a_differing_day_needs_it() -> None:
    src, rdr = _drifted()
    healthy = BASE + timedelta(days=DAYS)  # stored as drift, alike on both sides today
    drift = _stored_days() | {healthy: StoredDrift(4 * PER_DAY)}
    result = await _run(_FailingScan(src, healthy), DigestMemoryAdapter(rdr), True, drift=drift)
    assert result.error is None
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    assert result.buckets[DAYS].status == "ok"
    failed = await _run(_FailingScan(src, BASE), DigestMemoryAdapter(rdr), True, drift=drift)
    assert failed.error is not None and "the scan of a day failed" in failed.error
    assert failed.buckets == []


async def test_a_settling_day_is_not_scanned_early() -> None:
    src, rdr = _hours_drift()
    s_ad, r_ad = _Ranges(src), _Ranges(rdr)
    day = BASE + timedelta(days=HOURS_DAY)
    check = make_check(drilldown="{leaf_rows: 20}")
    # The drifted day ends 1 h before `now`, inside the 2 h settle: judged settling.
    now = day + timedelta(days=1, hours=1)
    result = await reconcile(
        check,
        s_ad,
        r_ad,
        BASE,
        day + timedelta(days=1),
        now=now,
        first=FirstPass(rescan=True, day_drift=_stored_hours()),
    )
    assert result.error is None
    assert result.buckets[HOURS_DAY].status == "settling"
    assert s_ad.scans == [] and r_ad.scans == []
