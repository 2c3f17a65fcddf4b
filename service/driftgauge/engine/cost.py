"""The planner's cost model: what a first pass of difference digests costs against day aggregates.

Costs are in units of the bare day-aggregate scan of the window (the floor every run
pays). The constants are measured on PostgreSQL at 1M-10M rows (bench/cell_cost.py,
bench/RESULTS.md); the other SQL kinds and OpenSearch were within them.
"""

from __future__ import annotations

DIGEST_PASS = 2.3
"""A scan of days with their difference digests: 2.2-2.4x the bare day query at 32-546
cells a sub-table (counting rows into their cells, before any sum, is already 1.7x)."""


def digests_first(share: float) -> bool:
    """Return True when digests for every day cost less than days first plus a second pass.

    `share` is the part of the window's days expected to differ (from stored verdicts).
    Day aggregates first cost 1, then DIGEST_PASS over that share of the days; digests
    for every day cost DIGEST_PASS once: they win above 1 - 1/DIGEST_PASS (57%).
    """
    return 1 + DIGEST_PASS * share > DIGEST_PASS
