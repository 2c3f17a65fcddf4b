"""Every digest difference is explained: found rows must account for the aggregates' gap.

After a drill-down, the rows of the keys it set apart (missing, extra, mismatched,
duplicated, excused) must differ, source minus reader, by exactly the count and the
digest (mod 2^64) by which the stores' aggregates of the bucket differ, and the same
for every node it fetched or split. If not, a store answered its aggregates and its rows
inconsistently (or a level was skipped), and the counts found cannot be trusted: the
bucket is `error` with reason `unexplained_difference`, never `ok`. Measure totals are
content the digest covers (a measure is one of the fields): totals that differ while the
rows found do not is the same inconsistency.
"""

from __future__ import annotations

from driftgauge.core.aggregate import Aggregate, measures_differ
from driftgauge.engine.join import Delta

REASON = "unexplained_difference"


def mismatch(where: str, source: Aggregate, reader: Aggregate, found: Delta) -> str | None:
    """Return why `found` does not account for how the aggregates differ, else None."""
    want = Delta.between(source, reader)
    if want == found:
        return None
    return (
        f"{where}: the aggregates differ by {want.count:+d} rows, digest "
        f"{want.digest:016x}; the differences found by {found.count:+d} rows, digest "
        f"{found.digest:016x}"
    )


def reasons(problems: list[str], limit: int = 5) -> list[str]:
    """Return bucket reasons for unexplained nodes, the first few named."""
    out = [f"{REASON}: {p}" for p in problems[:limit]]
    if len(problems) > limit:
        out.append(f"{REASON}: and {len(problems) - limit} more nodes")
    return out


def totals_mismatch(where: str, source: Aggregate, reader: Aggregate, found: Delta) -> str | None:
    """Return why differing measure totals have no differing row to account for them."""
    names = measures_differ(source, reader)
    if not names or found != Delta():
        return None
    return f"{where}: the totals of {', '.join(names)} differ, but no row the drill-down found does"
