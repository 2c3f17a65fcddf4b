"""This process's observations of its own work, for /metrics: store calls and runs.

Counted in the process (they restart at 0, as counters and histograms may), not stored:
they describe this replica's work, not the results. A leaf module, so the engine, the
preflight and the runner can record into it without importing the metrics package.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from driftgauge.core.errors import (
    DriftgaugeError,
    StoreError,
    StorePermissionError,
    StoreTimeout,
    StoreUnavailable,
)

OPERATIONS = ("open", "preflight", "digests", "slots", "prefixes", "rows")
"""What a store call did: connect, read the field schema, bucket digests, slot digests,
key-hash prefix digests, rows."""
SCANS = ("digests", "slots", "prefixes", "rows")
"""The OPERATIONS that read rows."""
ERROR_KINDS = ("timeout", "unavailable", "permission", "query")
_SHARED_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""The bounds both histograms have: half a second to five minutes."""
QUERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, *_SHARED_BUCKETS)
# Runs last from well under a second (a small recent window) to an hour (full history).
RUN_BUCKETS = (0.1, *_SHARED_BUCKETS, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)


@dataclass
class Series:
    """One histogram series: a count per upper bound (not cumulative), a sum."""

    counts: list[int]
    total: float = 0.0

    def cumulative(self) -> list[int]:
        """Return the counts at or below each bound, then the overall count (+Inf)."""
        out, running = [], 0
        for n in self.counts:
            running += n
            out.append(running)
        return out


@dataclass
class Histogram:
    """Observations by label values; bounds are fixed at creation."""

    bounds: tuple[float, ...]
    series: dict[tuple[str, ...], Series] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        """Record one observation under these label values."""
        with self._lock:
            s = self.series.setdefault(labels, Series([0] * (len(self.bounds) + 1)))
            # `le` is inclusive: a value equal to a bound falls in that bound's bucket.
            s.counts[bisect.bisect_left(self.bounds, value)] += 1
            s.total += value

    def snapshot(self) -> dict[tuple[str, ...], tuple[list[int], float]]:
        """Return each series' cumulative counts (last one +Inf) and sum."""
        with self._lock:
            return {k: (s.cumulative(), s.total) for k, s in self.series.items()}


STORE_QUERIES = Histogram(QUERY_BUCKETS)
"""Store call durations by (store, operation)."""
RUNS = Histogram(RUN_BUCKETS)
"""Run durations by (check, trigger)."""


@dataclass
class LabelCounts:
    """Counters by label values, added to from any thread."""

    values: dict[tuple[str, ...], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, labels: tuple[str, ...], n: int = 1) -> None:
        """Add `n` to the counter of these label values."""
        with self._lock:
            self.values[labels] = self.values.get(labels, 0) + n

    def snapshot(self) -> dict[tuple[str, ...], int]:
        """Return every counter so far."""
        with self._lock:
            return dict(self.values)


STORE_ERRORS = LabelCounts()
"""Failed store calls by (store, kind)."""
ROWS_SCANNED = LabelCounts()
"""Rows that store calls digested or returned, by (store, operation): the load a run puts
on a store, so a check that grows into a load incident shows before it becomes one."""


SLOT_WAITS = Histogram(QUERY_BUCKETS)
"""How long store calls waited for one of their store's query slots, by (store,)."""
SLOT_WAITING = LabelCounts()
"""Store calls waiting for a query slot right now, by (store,) (goes up and down)."""


def error_kind(exc: StoreError) -> str:
    """Return the ERROR_KINDS entry for a store error."""
    if isinstance(exc, StoreTimeout):
        return "timeout"
    if isinstance(exc, StoreUnavailable):
        return "unavailable"
    if isinstance(exc, StorePermissionError):
        return "permission"
    return "query"


def count_error(store: str, kind: str) -> None:
    """Count one failed call on `store`."""
    STORE_ERRORS.add((store, kind))


def error_counts() -> dict[tuple[str, ...], int]:
    """Return failed store calls so far, by (store, kind)."""
    return STORE_ERRORS.snapshot()


@contextmanager
def store_call(store: str, operation: str) -> Iterator[None]:
    """Time one store call and count it as an error if it raises a StoreError.

    A call cancelled because the other side failed (or the run's deadline passed) is
    neither timed nor counted: it did not finish, and its store did nothing wrong.
    """
    t0 = time.perf_counter()
    try:
        yield
    except StoreError as exc:
        count_error(store, error_kind(exc))
        STORE_QUERIES.observe((store, operation), time.perf_counter() - t0)
        raise
    except DriftgaugeError:
        STORE_QUERIES.observe((store, operation), time.perf_counter() - t0)
        raise
    STORE_QUERIES.observe((store, operation), time.perf_counter() - t0)


def run_finished(check: str, trigger: str, seconds: float) -> None:
    """Record how long one run of `check` took, whatever its outcome."""
    RUNS.observe((check, trigger), seconds)
