"""Every kind's sub-hour slot digests and row fetches by time sub-range agree with Python."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from driftgauge.stores.base import BucketDigest, SlotFirstPass, StoreAdapter
from tests.conformance.items import ITEMS, ROWS, RULES, SPEC
from tests.conformance.spec import SLOT_FIRST_PASS, Kind, Source, Store
from tests.integration import dataset as ds
from tests.integration.dataset import DST_DAY, ODD, RANGES, python_rows_in, python_slots

pytestmark = pytest.mark.integration

WINDOW = (ds.START, ds.END)


@pytest.fixture(scope="module")
async def source(kind: Kind, stored: Store) -> Source:
    """Return the items as the kind holds them."""
    return await stored(kind, ITEMS)


@pytest.fixture(scope="module")
async def adapter(source: Source) -> AsyncIterator[StoreAdapter]:
    """Yield an adapter on the items."""
    opened = await source.open(SPEC)
    try:
        yield opened
    finally:
        await opened.close()


async def _rows(
    adapter: StoreAdapter,
    ranges: list[tuple[datetime, datetime]],
    prefixes: list[str] | None = None,
) -> list[Any]:
    return sorted(
        [
            (r.key, r.key_hash, r.row_hash, r.event_time)
            async for r in adapter.iter_rows(*WINDOW, prefixes, ranges=ranges)
        ]
    )


@pytest.mark.parametrize("seconds", [300, 240, 900])
@pytest.mark.parametrize("window", [DST_DAY, ODD], ids=["dst_day", "odd_start"])
async def test_slots_agree_with_python(
    adapter: StoreAdapter, seconds: int, window: tuple[datetime, datetime]
) -> None:
    want = python_slots(ROWS, *window, seconds)
    assert await adapter.slot_digests(*window, seconds) == want
    start, end = (w.astimezone(UTC) for w in window)
    assert all(
        (b.start.astimezone(UTC) - start) % timedelta(seconds=seconds) == timedelta(0) for b in want
    )
    assert want[0].start >= start and want[-1].start < end
    # Python's rows are spread over the whole window; most slots hold some.
    assert len(want) > 0.9 * ((end - start) // timedelta(seconds=seconds))


@pytest.mark.parametrize("seconds", [300, 240, 900])
async def test_slots_sum_to_the_day(adapter: StoreAdapter, seconds: int) -> None:
    (day,) = await adapter.bucket_digests(*DST_DAY, "day")
    slots = await adapter.slot_digests(*DST_DAY, seconds)
    assert sum(s.agg.count for s in slots) == day.agg.count > 0
    assert sum(s.agg.distinct_keys for s in slots) == day.agg.distinct_keys
    assert sum(s.agg.digest for s in slots) % 2**64 == day.agg.digest
    assert len(slots) <= 23 * 3600 // seconds


async def test_hour_slots_are_the_hour_buckets(adapter: StoreAdapter) -> None:
    hours = await adapter.bucket_digests(*DST_DAY, "hour")
    assert len(hours) == 23
    assert await adapter.slot_digests(*DST_DAY, 3600) == hours


async def test_slots_count_exclusions_by_reason(source: Source) -> None:
    window = (ODD[0], ds.END)  # includes the day only excluded rows fall on
    want = python_slots(ROWS, *window, 900, ds.pg_reason)
    adapter = await source.open(replace(SPEC, exclusions=RULES))
    try:
        assert await adapter.slot_digests(*window, 900) == want
    finally:
        await adapter.close()
    assert any(b.agg.count == 0 and b.excluded for b in want)
    assert {"no_label", "tier_c"} <= {k for b in want for k in b.excluded}
    in_window = sum(window[0] <= r.ts < window[1] for r in ROWS)
    assert sum(b.agg.count + sum(b.excluded.values()) for b in want) == in_window


@pytest.mark.parametrize("prefixes", [None, ["f", "01", "a"]])
async def test_iter_rows_only_in_ranges(adapter: StoreAdapter, prefixes: list[str] | None) -> None:
    want = python_rows_in(ROWS, RANGES, prefixes)
    assert await _rows(adapter, RANGES, prefixes) == want
    everything = ds.python_rows(ROWS, prefixes)
    assert 0 < len(want) < len(everything) / 10
    assert len({w[0] for w in want}) == len(want)  # overlapping sub-ranges yield a row once
    assert await _rows(adapter, []) == []


async def test_a_long_list_of_ranges_reads_each_row_in_them_once(adapter: StoreAdapter) -> None:
    # 1,800 spans: one a millisecond long at every fifth row's time, each also given
    # twice, and empty ones between; past the 1,024 clauses OpenSearch takes in a query.
    picked = sorted({r.ts for r in ROWS if ds.START <= r.ts < ds.END})[::5][:600]
    ms = timedelta(milliseconds=1)
    ranges = [(t, t + ms) for t in picked] + [(t, t + ms) for t in picked]
    ranges += [(t + 2 * ms, t + 2 * ms) for t in picked]
    want = python_rows_in(ROWS, ranges)
    assert len(want) >= 600 and len(ranges) == 1800
    assert await _rows(adapter, ranges) == want


async def test_exclusions_stay_out_of_ranged_rows(source: Source) -> None:
    kept = [r for r in ROWS if ds.pg_reason(r) is None]
    want = python_rows_in(kept, RANGES)
    adapter = await source.open(replace(SPEC, exclusions=RULES))
    try:
        assert await _rows(adapter, RANGES) == want
    finally:
        await adapter.close()
    assert 0 < len(want) < len(python_rows_in(ROWS, RANGES))


@pytest.mark.parametrize("seconds", [0, -240, 7, 7200, 86_400])
async def test_slot_seconds_must_divide_an_hour(adapter: StoreAdapter, seconds: int) -> None:
    with pytest.raises(ValueError, match="seconds must be a whole divisor of 3600"):
        await adapter.slot_digests(*DST_DAY, seconds)


async def test_slot_and_range_bounds_must_be_aware(adapter: StoreAdapter) -> None:
    naive = (datetime(2024, 3, 9), datetime(2024, 3, 10))
    with pytest.raises(ValueError, match="seconds must be a whole divisor"):
        await adapter.slot_digests(*DST_DAY, 240.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"ranges\[1\] bounds must be timezone-aware"):
        _ = [r async for r in adapter.iter_rows(*WINDOW, ranges=[RANGES[0], naive])]
    with pytest.raises(ValueError, match="whole millisecond"):
        await adapter.slot_digests(DST_DAY[0] + timedelta(microseconds=5), DST_DAY[1], 240)


async def test_first_pass_slots_are_each_days_slot_query(kind: Kind, source: Source) -> None:
    kind.require(SLOT_FIRST_PASS)
    window = (DST_DAY[0] - timedelta(days=1), DST_DAY[1] + timedelta(days=1))
    days = [window[0] + timedelta(days=i) for i in range(3)]
    days = [datetime(d.year, d.month, d.day, tzinfo=ds.TZ) for d in days]
    adapter = await source.open(replace(SPEC, exclusions=RULES))
    try:
        assert isinstance(adapter, SlotFirstPass)
        first = await adapter.day_and_slot_digests(*window, 60)
        assert first.days == await adapter.bucket_digests(*window, "day")
        assert sorted(first.slots) == days
        for start, end in zip(days, [*days[1:], window[1]], strict=True):
            # Only expected rows are in first-pass slots; slots of excluded rows go.
            want = [
                BucketDigest(b.start, b.agg)
                for b in python_slots(ROWS, start, end, 60, ds.pg_reason)
                if b.agg.count
            ]
            assert first.slots[start] == want
            # The kind's slot query of the day lines up slot for slot.
            assert [
                BucketDigest(b.start, b.agg)
                for b in await adapter.slot_digests(start, end, 60)
                if b.agg.count
            ] == want
        day_total = next(b.agg for b in first.days if b.start == DST_DAY[0])
        dst_slots = first.slots[DST_DAY[0]]
        assert sum(s.agg.count for s in dst_slots) == day_total.count > 0
        assert sum(s.agg.digest for s in dst_slots) % 2**64 == day_total.digest
    finally:
        await adapter.close()
