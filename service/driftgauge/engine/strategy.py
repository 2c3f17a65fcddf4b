"""A run's first-pass strategy: one object the planner returns and the engine follows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from driftgauge.engine.plan import StoredDrift


@dataclass(frozen=True)
class FirstPass:
    """How a run scans its window first, and what a day that then differs gets.

    The default is day aggregates only, each differing day drilled down.
    """

    slots: bool = False
    """Ask stores that can for each day's slots in the first scan: about 20% more for
    that scan, and no second hashing pass over a day that differs."""
    width: int | None = None
    """Ask, when both sides can, for each day's difference digests of this many cells a
    sub-table in the first scan (encoding.iblt); a differing day is then peeled."""
    rescan: bool = False
    """After a first scan of day aggregates, scan the differing days for their digests
    (each alone while they are few, plan.few_days; else one engine.second_pass)."""
    day_drift: Mapping[datetime, StoredDrift] | None = None
    """With `rescan`: what each day's (by UTC start) last verdict said of its drift, to
    size and place its scan."""

    def describe(self) -> str:
        """Return the strategy in a few words, as logs and reports name it."""
        if self.width is not None:
            return f"difference digests of every day ({self.width} cells a sub-table)"
        if self.rescan:
            return "day aggregates, then digests of the days that differ"
        return "day aggregates and slots" if self.slots else "day aggregates"


DAYS_ONLY = FirstPass()
"""Day aggregates in the first scan, each differing day drilled down."""
