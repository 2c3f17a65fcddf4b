"""A dense day's second scan may go wider than a whole window's pass, where a store can."""

from __future__ import annotations

import random
from datetime import timedelta

from driftgauge.encoding import iblt, sizing
from driftgauge.engine.result import BucketResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.jobs.first_pass import digest_width
from driftgauge.stores.memory import DigestMemoryAdapter
from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from driftgauge.stores.postgres.adapter import PostgresAdapter

from .engine_helpers import BASE, History, between, day_rows, make_check


def _pairs(rng: random.Random, n: int) -> list[tuple[int, int]]:
    return [(rng.getrandbits(64), rng.randrange(10**15)) for _ in range(n)]


def test_a_day_beyond_the_pass_width_peels_at_a_width_only_a_wide_store_builds() -> None:
    # 5% of a 250k-row day differing at 10M rows over 40 days: 16,700 rows, 4,175 a kind.
    rng = random.Random(21)
    common, only_s, only_r = _pairs(rng, 2000), _pairs(rng, 8350), _pairs(rng, 8350)

    def diff(width: int) -> dict[int, iblt.Cell]:
        return iblt.subtract(iblt.build(common + only_s, width), iblt.build(common + only_r, width))

    narrow = diff(iblt.MAX_WIDTH)
    assert iblt.peel(narrow, iblt.MAX_WIDTH) is None
    assert sizing.retry_width(narrow, iblt.MAX_WIDTH) is None  # a store capped at the pass's
    wider = sizing.retry_width(narrow, iblt.MAX_WIDTH, iblt.DAY_WIDTH)
    assert wider is not None and iblt.MAX_WIDTH < wider <= iblt.DAY_WIDTH
    got = iblt.peel(diff(wider), wider)
    assert got is not None
    assert sorted((e.row_hash, e.micros, e.sign) for e in got) == sorted(
        [(h, t, 1) for h, t in only_s] + [(h, t, -1) for h, t in only_r]
    )


def test_a_whole_window_pass_stays_capped() -> None:
    assert iblt.width_for(16_700) == iblt.MAX_WIDTH
    assert iblt.width_for(16_700, iblt.DAY_WIDTH) == 11_698
    assert iblt.width_for(10**9, iblt.DAY_WIDTH) == iblt.DAY_WIDTH


def test_each_store_says_how_wide_a_day_it_builds() -> None:
    assert iblt.widest(PostgresAdapter) == iblt.DAY_WIDTH
    assert iblt.widest(DigestMemoryAdapter([])) == iblt.DAY_WIDTH
    # Painless sums a day's cells in one flat array: a day scanned again may be as wide.
    assert iblt.widest(OpenSearchAdapter) == iblt.DAY_WIDTH
    assert iblt.widest(object()) == iblt.MAX_WIDTH


async def test_a_day_no_pass_table_holds_does_not_widen_every_days_table() -> None:
    check = make_check()
    end = BASE + timedelta(days=3)
    dense = BucketResult(start=BASE, status="drift", missing=4174, extra=4174, mismatched=4174)
    light = BucketResult(start=BASE, status="drift", missing=300, extra=10, mismatched=100)
    healthy = BucketResult(start=BASE, status="ok")

    async def width(*days: BucketResult) -> int:
        return digest_width(await History(list(days)).day_buckets(), check, BASE, end)

    # The dense day is scanned again at its own width (engine.resize) whatever the pass's.
    assert await width(dense, light, healthy) == iblt.width_for(510)
    assert await width(dense, healthy) == sizing.ESTIMATE_WIDTH
    assert await width(light, healthy) == iblt.width_for(510)
    assert await width(healthy) == iblt.DEFAULT_WIDTH
    heavy = BucketResult(start=BASE, status="drift", missing=5000, mismatched=400)
    assert await width(heavy, healthy) == iblt.width_for(5800) < iblt.MAX_WIDTH


async def test_a_dense_day_sized_out_of_the_pass_peels_on_its_second_scan() -> None:
    src = day_rows(0, 3000) + day_rows(1, 3000)
    rdr = src[:2000] + src[3000:]  # day 0: 1,000 missing, more than a 256-cell table holds
    s_ad, r_ad = DigestMemoryAdapter(src), DigestMemoryAdapter(rdr)
    result = await between(
        make_check(drilldown="{leaf_rows: 20}"),
        s_ad,
        r_ad,
        2,
        first=FirstPass(width=sizing.ESTIMATE_WIDTH),
    )
    assert [b.missing for b in result.buckets] == [1000, 0]
    cells = [c for c in s_ad.calls if c.startswith("days+cells")]
    assert cells[0] == f"days+cells:{sizing.ESTIMATE_WIDTH}" and len(cells) == 2
    assert "rows" in s_ad.calls and not any(c.startswith("slots") for c in s_ad.calls)
