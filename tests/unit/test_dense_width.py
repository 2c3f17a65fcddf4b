"""A dense day's second scan may go wider than a whole window's pass, where a store can."""

from __future__ import annotations

import random

from driftgauge.encoding import iblt, sizing
from driftgauge.stores.memory import DigestMemoryAdapter
from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from driftgauge.stores.postgres.adapter import PostgresAdapter


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
    # Painless fills a bucket per cell: OpenSearch keeps the pass's cap.
    assert iblt.widest(OpenSearchAdapter) == iblt.MAX_WIDTH
    assert iblt.widest(object()) == iblt.MAX_WIDTH
