"""A cached snapshot of the latest stored results, refreshed after runs, read at scrape time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from driftgauge.config.runtime import Check
from driftgauge.engine.result import BucketResult
from driftgauge.scheduler import utc_now
from driftgauge.state import RunRow, StateStore, StoredBucket


@dataclass(frozen=True)
class CheckSnapshot:
    """What the metrics of one check are built from."""

    check: str
    schedule_seconds: float | None = None
    last_run: RunRow | None = None
    """The latest finished run, completed or failed."""
    last_success: RunRow | None = None
    """The latest completed run with no bucket in error."""
    run_counts: Mapping[str, int] = field(default_factory=dict)
    buckets: tuple[BucketResult, ...] = ()
    """The recent window's days, each from the latest completed run that judged it."""
    exclusion_limits: Mapping[str, float] = field(default_factory=dict)
    """The configured exclusion-rate tolerance per reason."""
    history: tuple[BucketResult, ...] = ()
    """The full-history window's days before the recent window, each as last judged."""


async def load_check(state: StateStore, check: Check, now: datetime) -> CheckSnapshot:
    """Read one check's snapshot from the state database."""
    today = now.astimezone(check.timezone).date()
    since = today - timedelta(days=check.schedule.recent_days - 1)
    first = today - timedelta(days=check.schedule.full_days - 1)
    last_run, last_success, counts, days, old = await asyncio.gather(
        state.latest_finished_run(check.name), state.latest_success(check.name),
        state.run_counts(check.name), state.day_buckets(check.name, since, today,
                                                        check.timezone),
        _history(state, check, first, since))
    every = check.schedule.recent_every
    return CheckSnapshot(
        check=check.name, schedule_seconds=every.total_seconds() if every else None,
        last_run=last_run, last_success=last_success, run_counts=counts,
        buckets=tuple(d.bucket for d in days),
        exclusion_limits=dict(check.tolerance.exclusion_rate),
        history=tuple(d.bucket for d in old))


async def _history(state: StateStore, check: Check, first: date,
                   recent: date) -> list[StoredBucket]:
    """Return the days in [first, recent) as last judged (none when the window is short)."""
    if first >= recent:
        return []
    return await state.day_buckets(check.name, first, recent - timedelta(days=1),
                                   check.timezone)


class SnapshotCache:
    """Hold the latest snapshot per check; scrapes read it without touching the database."""

    def __init__(self, state: StateStore, checks: Mapping[str, Check],
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._state = state
        self._checks = checks
        self._clock = clock
        self._current: dict[str, CheckSnapshot] = {}

    def current(self) -> dict[str, CheckSnapshot]:
        """Return the snapshot of every check loaded so far."""
        return dict(self._current)

    async def refresh(self, check: str | None = None) -> None:
        """Reload one check (or all); on a state error the previous snapshot stays."""
        names = [check] if check is not None else sorted(self._checks)
        now = self._clock()
        loaded = await asyncio.gather(*(load_check(self._state, self._checks[n], now)
                                        for n in names))
        # Swap in a new dict so a concurrent scrape sees either the old or the new one.
        self._current = {**self._current, **{s.check: s for s in loaded}}
