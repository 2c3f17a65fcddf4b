"""The aggregate of a set of rows: what two sides of a check compare at every level."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Aggregate:
    """Count, distinct-key count and digest (sum of row hashes mod 2^64) of a set of rows."""

    count: int = 0
    distinct_keys: int = 0
    digest: int = 0

    @property
    def has_duplicates(self) -> bool:
        """Return True when some key has more than one row."""
        return self.count != self.distinct_keys

    def same_as(self, other: Aggregate) -> bool:
        """Return True when both sides hold the same rows by count, keys and content."""
        return (self.count, self.distinct_keys, self.digest) == (
            other.count, other.distinct_keys, other.digest)
