"""The planner's cost model: what a first pass of difference digests costs against day aggregates.

Costs are in units of the bare day-aggregate scan of the window (the floor every run
pays). The default is measured on PostgreSQL at 1M-10M rows (bench/cell_cost.py,
bench/RESULTS.md); `driftgauge calibrate` measures it for a store (engine.calibrate) and
the planner then uses that store's own.
"""

from __future__ import annotations

DIGEST_PASS = 2.3
"""A scan of days with their difference digests: 2.2-2.4x the bare day query at 32-546
cells a sub-table (counting rows into their cells, before any sum, is already 1.7x)."""


def digests_first(share: float, digest_pass: float = DIGEST_PASS) -> bool:
    """Return True when digests for every day cost less than days first plus a second pass.

    `share` is the part of the window's days expected to differ (from stored verdicts);
    `digest_pass` the digests' scan over the day scan (DIGEST_PASS, or as `driftgauge
    calibrate` measured it for the store). Day aggregates first cost 1, then digest_pass
    over that share of the days; digests for every day cost digest_pass once: they win
    above 1 - 1/digest_pass (57% at 2.3).
    """
    return 1 + digest_pass * share > digest_pass
