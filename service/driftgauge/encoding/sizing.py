"""Size difference digests: a first run's width, and a second try's from a failed table.

A run with a stored verdict sizes its digests from it (jobs.first_pass). A run without
one spends a fixed budget of cells over the window's days, so moderate drift peels in
the first scan. A day whose table still does not peel says, from its own cells, about
how many rows it differs by: the sum of its cells' squared counts does (see estimate),
whether or not the table peels. One more scan of that day at a width sized from that
estimate costs one indexed day scan per side, far less than drilling the day down.
"""

from __future__ import annotations

import math

from driftgauge.encoding import iblt

FIRST_RUN_CELLS = 1 << 16
"""Cells per side a run without a stored verdict spreads over its days (all sub-tables)."""
MARGIN = 1.5
"""A second try sizes for this many times the estimate: the estimate is off by a few %
at wide tables and by about 15% (one standard deviation) at the narrowest."""
ESTIMATE_WIDTH = 256
"""Cells per sub-table of a pass when a stored day differed by more than a pass holds:
enough for that day's table to estimate its rows within about 10% for its second scan."""
PEEL_LIMIT = 1.3
"""Cells per differing row below which a K=3 table almost never peels (the limit is 1.23)."""


def first_width(days: int) -> int:
    """Return the sub-table width of a run over `days` days that no stored verdict sizes."""
    per_day = FIRST_RUN_CELLS // (iblt.K * max(days, 1))
    return max(iblt.DEFAULT_WIDTH, min(iblt.MAX_WIDTH, per_day))


def estimate(diff: iblt.Table, width: int) -> float:
    """Return about how many rows a subtracted table holds (source's and reader's alike).

    Each row adds its sign (+1 source, -1 reader) to one cell a sub-table, so over a
    sub-table the squared counts sum, on average, to d + (S^2 - d) / width, where d is
    the number of rows and S the sum of their signs (the day's count difference): solved
    for d, per sub-table, then averaged. A cell that is not zero holds a row at least,
    so no sub-table can hold fewer rows than it has such cells.
    """
    squares = [0] * iblt.K
    sums = [0] * iblt.K
    filled = [0] * iblt.K
    for i, cell in diff.items():
        j = i // width
        if not 0 <= j < iblt.K:
            continue  # not a cell of this width: the peel refuses such a table anyway
        squares[j] += cell[0] * cell[0]
        sums[j] += cell[0]
        filled[j] += 1
    if width <= 1:
        return float(max(filled))
    moments = [(q - s * s / width) / (1 - 1 / width) for q, s in zip(squares, sums, strict=True)]
    return max(sum(moments) / iblt.K, float(max(filled)))


def retry_width(diff: iblt.Table, width: int, widest: int = iblt.MAX_WIDTH) -> int | None:
    """Return the width to scan a day again at, after its table of `width` did not peel.

    `widest` is the widest table both stores build for a day (iblt.widest). None when no
    such table would peel either: the estimate is beyond what the widest holds, or the
    table was already the widest.
    """
    rows = estimate(diff, width)
    if width >= widest or rows * PEEL_LIMIT > iblt.K * widest:
        return None
    # At least double: a table that failed though sized for its rows held a cycle.
    return min(widest, max(2 * width, iblt.width_for(math.ceil(rows * MARGIN), widest)))
