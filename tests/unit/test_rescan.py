"""Drift stored in a few days: the first pass takes day aggregates only, and each day that
differs is scanned alone for its difference digests and peeled, not drilled down."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from driftgauge.encoding import iblt, sizing
from driftgauge.engine.plan import RESCAN_SHARE
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.stores.base import Granularity
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import BASE, NOW, make_check, row
from .test_first_run import DAYS, PER_DAY, _drifted

DRILLS = ("slots", "prefixes", "hours")


WINDOW = DAYS * RESCAN_SHARE
"""The window's days: the drifted ones are then few enough to scan each alone."""


async def _run(
    source: MemoryAdapter,
    reader: MemoryAdapter,
    rescan: bool,
    days: int = WINDOW,
    drift: dict[datetime, int] | None = None,
) -> RunResult:
    check = make_check(drilldown="{leaf_rows: 20}")
    end = BASE + timedelta(days=days)
    return await reconcile(
        check, source, reader, BASE, end, now=NOW, rescan_days=rescan, day_drift=drift
    )


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
    src, rdr = _drifted()
    s_ad = DigestMemoryAdapter(src)
    # 4 x PER_DAY rows differ a day (a mismatch is two): sized for them, one scan peels.
    drift = {BASE + timedelta(days=d): 4 * PER_DAY for d in range(DAYS)}
    result = await _run(s_ad, DigestMemoryAdapter(rdr), rescan=True, drift=drift)
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    sized = f"days+cells:{iblt.width_for(4 * PER_DAY)}"
    assert [c for c in s_ad.calls if c.startswith("days+cells")] == [sized] * DAYS
    assert all(b.tree == [] for b in result.buckets[:DAYS])


async def test_without_rescan_the_same_days_are_drilled_down_to_the_same_counts() -> None:
    src, rdr = _drifted()
    s_ad = DigestMemoryAdapter(src)
    result = await _run(s_ad, DigestMemoryAdapter(rdr), rescan=False)
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    assert any(c.startswith(DRILLS) for c in s_ad.calls)
    assert not any(c.startswith("days+cells") for c in s_ad.calls)


async def test_drift_on_more_days_than_a_few_is_drilled_down_though_rescans_were_asked() -> None:
    src, rdr = _drifted()
    s_ad = DigestMemoryAdapter(src)
    # Every day of the window differs: drift spread since the verdict that planned rescans.
    result = await _run(s_ad, DigestMemoryAdapter(rdr), rescan=True, days=DAYS)
    assert [_counts(b) for b in result.buckets] == DRIFT
    assert any(c.startswith(DRILLS) for c in s_ad.calls)
    assert not any(c.startswith("days+cells") for c in s_ad.calls)


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


async def test_a_side_without_digests_is_drilled_down() -> None:
    src, rdr = _drifted()
    s_ad = MemoryAdapter(src)
    result = await _run(s_ad, DigestMemoryAdapter(rdr), rescan=True)
    assert [_counts(b) for b in result.buckets[:DAYS]] == DRIFT
    assert any(c.startswith(DRILLS) for c in s_ad.calls)
