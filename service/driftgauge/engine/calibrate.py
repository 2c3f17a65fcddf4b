"""Measure the planner's cost constant on a real store: digests' scan against the day scan.

engine.cost prices a first pass of difference digests at DIGEST_PASS times the bare
day-aggregate scan, as measured on PostgreSQL. Other stores differ (a scripted metric
on OpenSearch, a distributed engine's shuffle), so `driftgauge calibrate` times both
scans of one side over a check's window, in turn, and keeps the median ratio per store.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from driftgauge.core.errors import ConfigError
from driftgauge.encoding import sizing
from driftgauge.stores.base import DigestFirstPass, StoreAdapter

T = TypeVar("T")
ROUNDS = 3
"""Rounds of both scans, in turn: the median of each is kept, so one slow run is not."""


@dataclass(frozen=True)
class Calibration:
    """One store's measured scans over a window, and their ratio."""

    store: str
    kind: str
    rows: int
    days_seconds: list[float]
    digests_seconds: list[float]
    width: int

    @property
    def digest_pass(self) -> float:
        """Return the median digests' scan over the median day scan (the cost constant)."""
        floor = statistics.median(self.days_seconds)
        return statistics.median(self.digests_seconds) / max(floor, 1e-6)


async def calibrate(
    store: str,
    kind: str,
    adapter: StoreAdapter,
    start: datetime,
    end: datetime,
    days: int,
    rounds: int = ROUNDS,
) -> Calibration:
    """Return the store's day scan and digests' scan over [start, end), timed in turn.

    The digests are a first run's width over `days` days (sizing.first_width), the width
    the planner's choice is about. A store without difference digests is a ConfigError
    naming it: the planner never prices digests there.
    """
    if not isinstance(adapter, DigestFirstPass):
        raise ConfigError([f"stores.{store}: a {kind} store builds no difference digests"])
    if rounds < 1:
        raise ConfigError([f"--rounds: {rounds} is not a positive number of rounds"])
    width = sizing.first_width(days)
    digests: DigestFirstPass = adapter  # narrowed above; lambdas do not keep it
    plain: list[float] = []
    cells: list[float] = []
    rows = 0
    for _ in range(rounds):
        got = await _timed(lambda: adapter.bucket_digests(start, end, "day"))
        plain.append(got[0])
        rows = sum(b.agg.count for b in got[1])
        cells.append((await _timed(lambda: digests.day_and_cell_digests(start, end, width)))[0])
    return Calibration(store, kind, rows, plain, cells, width)


async def _timed(call: Callable[[], Awaitable[T]]) -> tuple[float, T]:
    """Return how long `call` took, in seconds, and what it returned."""
    t0 = time.perf_counter()
    got = await call()
    return time.perf_counter() - t0, got
