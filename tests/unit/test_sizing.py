"""Sizing difference digests without history: a first run's width and a failed table's estimate."""

from __future__ import annotations

import random

from driftgauge.encoding import iblt, sizing


def _pairs(rng: random.Random, n: int) -> list[tuple[int, int]]:
    return [(rng.getrandbits(64), rng.randrange(10**15)) for _ in range(n)]


def _diff(rng: random.Random, differing: int, width: int) -> tuple[list[tuple[int, int]], ...]:
    """Return a common part and each side's own rows: a quarter missing, extra, two per change."""
    q = differing // 4
    common = _pairs(rng, 300)
    only_s = _pairs(rng, 2 * q)  # missing rows and the source's side of changed ones
    only_r = _pairs(rng, 2 * q)
    return common, only_s, only_r


def _table(parts: tuple[list[tuple[int, int]], ...], width: int) -> dict[int, iblt.Cell]:
    common, only_s, only_r = parts
    return iblt.subtract(iblt.build(common + only_s, width), iblt.build(common + only_r, width))


def test_the_estimate_of_an_overfull_table_is_close_to_its_rows() -> None:
    rng = random.Random(11)
    for width, rows, within in ((32, 500, 0.5), (32, 2000, 0.5), (546, 3000, 0.15)):
        for _ in range(10):
            diff = _table(_diff(rng, rows, width), width)
            assert iblt.peel(diff, width) is None  # far too small a table: it cannot peel
            assert abs(sizing.estimate(diff, width) / rows - 1) < within


def test_the_estimate_counts_missing_rows_alone_too() -> None:
    rng = random.Random(12)
    common = _pairs(rng, 300)
    gone = _pairs(rng, 400)
    diff = iblt.subtract(iblt.build(common + gone, 32), iblt.build(common, 32))
    assert 280 < sizing.estimate(diff, 32) < 520


def test_a_second_try_at_the_width_the_failed_table_asks_for_peels() -> None:
    rng = random.Random(13)
    for rows in (100, 500, 2000, 5000):
        parts = _diff(rng, rows, 32)
        wider = sizing.retry_width(_table(parts, 32), 32)
        assert wider is not None and 32 < wider <= iblt.MAX_WIDTH
        got = iblt.peel(_table(parts, wider), wider)
        assert got is not None and len(got) == 4 * (rows // 4)


def test_no_second_try_when_no_table_the_stores_build_would_peel() -> None:
    rng = random.Random(14)
    assert sizing.retry_width(_table(_diff(rng, 20000, 64), 64), 64) is None
    assert sizing.retry_width(_table(_diff(rng, 100, 16), 16), iblt.MAX_WIDTH) is None


def test_a_table_that_failed_though_wide_enough_is_tried_at_twice_the_width() -> None:
    # One row alone estimates one row: a peel that failed anyway held a cycle.
    diff = iblt.build([(12345, 6)], 64)
    assert sizing.retry_width(diff, 64) == 128


def test_a_first_run_spreads_a_fixed_budget_of_cells_over_its_days() -> None:
    assert sizing.first_width(40) == sizing.FIRST_RUN_CELLS // (iblt.K * 40) == 546
    assert sizing.first_width(1) == iblt.MAX_WIDTH
    assert sizing.first_width(0) == iblt.MAX_WIDTH
    assert sizing.first_width(10_000) == iblt.DEFAULT_WIDTH
