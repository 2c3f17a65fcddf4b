"""Vocabulary check: source values a field takes that the reader view's filter cannot match."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as default
from datetime import datetime

from driftgauge.config.frozen import Check
from driftgauge.stores.base import VocabularyCounter


@dataclass(frozen=True)
class VocabularyResult:
    """One field's source values that the reader does not accept, with their row counts."""

    check: str
    field: str
    window_start: datetime
    window_end: datetime
    unmatched: dict[str | None, int] = default(default_factory=dict)
    """Value (None for NULL) → source rows carrying it."""

    @property
    def unmatched_values(self) -> int:
        """Return how many distinct values the reader cannot match."""
        return len(self.unmatched)

    @property
    def unmatched_rows(self) -> int:
        """Return how many source rows carry such values."""
        return sum(self.unmatched.values())


def unmatched(counts: Mapping[str | None, int], accepted: Iterable[str]) -> dict[str | None, int]:
    """Return the values (with row counts) that are not among the accepted ones.

    NULL never matches a term filter, so it counts as unmatched.
    """
    ok = set(accepted)
    return {v: n for v, n in counts.items() if v is None or v not in ok}


async def measure_vocabulary(
    check: Check, source: VocabularyCounter, start: datetime, end: datetime
) -> list[VocabularyResult]:
    """Return, per vocabulary field, the source values in [start, end) the reader cannot match."""
    out = []
    for vf in check.vocabulary:
        counts = await source.value_counts(vf.source_column, start, end)
        out.append(
            VocabularyResult(check.name, vf.name, start, end, unmatched(counts, vf.accepted))
        )
    return out
