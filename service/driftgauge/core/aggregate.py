"""The aggregate of a set of rows: what two sides of a check compare at every level."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Aggregate:
    """Count, distinct-key count and digest (sum of row hashes mod 2^64) of a set of rows."""

    count: int = 0
    distinct_keys: int = 0
    digest: int = 0
    measures: Mapping[str, Decimal] | None = None
    """Each measure's exact total over the rows (NULL values add nothing); None: not summed
    at this level (prefixes, first-pass slots) or the check declares no measures."""

    @property
    def has_duplicates(self) -> bool:
        """Return True when some key has more than one row."""
        return self.count != self.distinct_keys

    def same_as(self, other: Aggregate) -> bool:
        """Return True when both sides hold the same rows by count, keys, content and totals."""
        if (self.count, self.distinct_keys, self.digest) != (
            other.count,
            other.distinct_keys,
            other.digest,
        ):
            return False
        return not measures_differ(self, other)


def minus(whole: Aggregate, part: Aggregate) -> Aggregate | None:
    """Return the aggregate of the rows of `whole` outside `part`, which it holds.

    Counts and totals subtract, the digest mod 2^64. Distinct keys subtract only where no
    key repeats, so a side with duplicates gives None, as does a part larger than the whole.
    """
    if whole.has_duplicates or part.has_duplicates or part.count > whole.count:
        return None
    if (whole.measures is None) != (part.measures is None):
        return None
    measures = None
    if whole.measures is not None and part.measures is not None:
        zero = Decimal(0)
        names = set(whole.measures) | set(part.measures)
        measures = {n: whole.measures.get(n, zero) - part.measures.get(n, zero) for n in names}
    rest = whole.count - part.count
    return Aggregate(rest, rest, (whole.digest - part.digest) % (1 << 64), measures)


def measures_differ(a: Aggregate, b: Aggregate) -> list[str]:
    """Return the measures whose totals differ, when both sides summed them (else none).

    A measure one side lacks counts as 0 there: a day with no rows has no totals.
    """
    if a.measures is None or b.measures is None:
        return []
    names = sorted(set(a.measures) | set(b.measures))
    zero = Decimal(0)
    return [n for n in names if a.measures.get(n, zero) != b.measures.get(n, zero)]
