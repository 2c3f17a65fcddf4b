"""A cached snapshot of the latest stored results, refreshed after runs, read at scrape time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from driftgauge.config.frozen import Check
from driftgauge.core.clock import utc_now
from driftgauge.core.errors import StateError
from driftgauge.engine.result import BucketResult
from driftgauge.state.codec import StoredBucket
from driftgauge.state.payloads import CheckRun
from driftgauge.state.reads import Reads
from driftgauge.state.store import StateStore


@dataclass(frozen=True)
class CheckSnapshot:
    """What the metrics of one check are built from."""

    check: str
    schedule_seconds: float | None = None
    last_run: CheckRun | None = None
    """The latest finished run, completed or failed."""
    last_success: CheckRun | None = None
    """The latest completed run with no bucket in error."""
    run_counts: Mapping[str, int] = field(default_factory=dict)
    buckets: tuple[BucketResult, ...] = ()
    """The recent window's days, each from the latest completed run that judged it."""
    exclusion_limits: Mapping[str, float] = field(default_factory=dict)
    """The configured exclusion-rate tolerance per reason."""
    history: tuple[BucketResult, ...] = ()
    """The full-history window's days before the recent window, each as last judged."""
    interrupted: int = 0
    trigger_times: Mapping[str, tuple[datetime, datetime | None]] = field(default_factory=dict)
    """Per trigger, when its latest run began and its latest one completed ("": first run)."""
    """Runs that stopped before they could finish (replica died or shut down mid-run)."""


async def load_check(state: Reads, check: Check, now: datetime) -> CheckSnapshot:
    """Read one check's snapshot from the state database, as of one moment."""
    today = now.astimezone(check.timezone).date()
    since = today - timedelta(days=check.schedule.recent_days - 1)
    first = today - timedelta(days=check.schedule.full_days - 1)
    # One snapshot, so a scrape never pairs a run's interruption with the run before it.
    async with state.snapshot(f"read the stored results of {check.name}", reads=7) as view:
        last_run = await view.latest_finished_run(check.name)
        last_success = await view.latest_success(check.name)
        counts, interrupted = await view.run_totals(check.name)
        triggers = await view.trigger_times(check.name)
        days = await view.day_buckets(check.name, since, today, check.timezone)
        old = await _history(view, check, first, since)
    every = check.schedule.recent_every
    return CheckSnapshot(
        check=check.name,
        schedule_seconds=every.total_seconds() if every else None,
        last_run=last_run,
        last_success=last_success,
        run_counts=counts,
        buckets=tuple(d.bucket for d in days),
        exclusion_limits=dict(check.tolerance.exclusion_rate),
        history=tuple(d.bucket for d in old),
        interrupted=interrupted,
        trigger_times=triggers,
    )


async def _history(state: Reads, check: Check, first: date, recent: date) -> list[StoredBucket]:
    """Return the days in [first, recent) as last judged (none when the window is short)."""
    if first >= recent:
        return []
    return await state.day_buckets(check.name, first, recent - timedelta(days=1), check.timezone)


@dataclass(eq=False)
class SnapshotCache:
    """Hold the latest snapshot per check; scrapes read it without touching the database."""

    state: StateStore
    checks: Mapping[str, Check]
    clock: Callable[[], datetime] = utc_now
    _current: dict[str, CheckSnapshot] = field(default_factory=dict, init=False)
    created_at: datetime = field(init=False)
    refreshed_at: datetime | None = field(default=None, init=False)
    """When every check was last read successfully."""
    state_up: bool = field(default=False, init=False)
    """Whether the latest read of the state database succeeded."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def __post_init__(self) -> None:
        self.created_at = self.clock()

    def current(self) -> dict[str, CheckSnapshot]:
        """Return the snapshot of every check loaded so far."""
        return dict(self._current)

    async def refresh(self, check: str | None = None) -> None:
        """Reload one check (or all); on a state error the previous snapshot stays."""
        names = [check] if check is not None else sorted(self.checks)
        # One refresh at a time: one that began earlier but ended later would otherwise
        # swap an older snapshot over a newer one, and a counter would go back.
        async with self._lock:
            now = self.clock()
            try:
                loaded = await asyncio.gather(
                    *(load_check(self.state, self.checks[n], now) for n in names)
                )
            except StateError:
                self.state_up = False
                raise
            # Swap in a new dict so a concurrent scrape sees either the old or the new one.
            self._current = {**self._current, **{s.check: s for s in loaded}}
            self.state_up = True
            if check is None:
                self.refreshed_at = now

    def age(self) -> float:
        """Return the seconds since every check was read (since start-up if never)."""
        since = self.refreshed_at or self.created_at
        return max(0.0, (self.clock() - since).total_seconds())


def state_part(cache: SnapshotCache) -> Callable[[], Iterable[Metric]]:
    """Return the part that says how fresh this replica's snapshot is and whether the DB answers.

    The reconciliation series keep their last values while the state database is down;
    these say so, so that stale never looks fresh. Every replica exports them: each serves
    its own snapshot.
    """

    def collect() -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "driftgauge_state_up", "1 if the latest read of the state database succeeded."
        )
        up.add_metric([], 1.0 if cache.state_up else 0.0)
        age = GaugeMetricFamily(
            "driftgauge_snapshot_age_seconds", "Seconds since the stored results were last read."
        )
        age.add_metric([], cache.age())
        out: list[Metric] = [up, age]
        if cache.refreshed_at is not None:
            last = GaugeMetricFamily(
                "driftgauge_state_last_refresh_timestamp_seconds",
                "When the stored results were last read.",
            )
            last.add_metric([], cache.refreshed_at.timestamp())
            out.append(last)
        return out

    return collect


def interrupted_part(
    snapshots: Callable[[], Mapping[str, CheckSnapshot]],
) -> Callable[[], Iterable[Metric]]:
    """Return the part that yields the stored count of interrupted runs per check."""

    def collect() -> Iterable[Metric]:
        interrupted = CounterMetricFamily(
            "driftgauge_check_interrupted_runs",
            "Runs that stopped before they could finish (their replica died or shut down).",
            labels=["check"],
        )
        for name, snap in sorted(snapshots().items()):
            interrupted.add_metric([name], snap.interrupted)
        yield interrupted

    return collect
