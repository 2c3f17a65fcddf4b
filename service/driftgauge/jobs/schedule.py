"""When checks run: per check a recent-window job and a full-history job, aligned across replicas.

Interval jobs fire on a grid anchored at the Unix epoch, so every replica fires the same
tick at the same instant and the state database can let exactly one of them run it.
Tests drive `run_due(now)` with their own clock instead of sleeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from driftgauge.config.runtime import Check
from driftgauge.cron import CronTrigger, trigger_for
from driftgauge.jobs.clock import EPOCH, utc_now

log = logging.getLogger("driftgauge.scheduler")
JobKind = Literal["recent", "full"]
_LOOKBACKS = [timedelta(minutes=1), timedelta(hours=1), timedelta(days=1), timedelta(days=8),
              timedelta(days=32), timedelta(days=367)]


@dataclass(frozen=True)
class JobSpec:
    """One scheduled job: a check, which window it covers and when it fires."""

    check: str
    kind: JobKind
    every: timedelta | None = None
    cron: str | None = None
    timezone: Any = UTC

    @property
    def id(self) -> str:
        """Return the job's id: `check:kind`."""
        return f"{self.check}:{self.kind}"

    def trigger(self) -> IntervalTrigger | CronTrigger:
        """Return the APScheduler trigger for this job."""
        if self.every is not None:
            return IntervalTrigger(seconds=self.every.total_seconds(), start_date=EPOCH,
                                   timezone=UTC)
        if self.cron is None:
            raise ValueError(f"job {self.id}: neither an interval nor a cron expression")
        return trigger_for(self.cron, self.timezone)

    def latest_fire(self, now: datetime) -> datetime | None:
        """Return the last fire time at or before `now`."""
        if self.every is not None:
            step = _micros(self.every)
            return EPOCH + timedelta(microseconds=(_micros(now - EPOCH) // step) * step)
        trig = self.trigger()
        for back in _LOOKBACKS:
            t = trig.get_next_fire_time(None, now - back)
            if t is None or t > now:
                continue
            while True:
                nxt = trig.get_next_fire_time(t, t + timedelta(microseconds=1))
                if nxt is None or nxt > now:
                    return t.astimezone(UTC)
                t = nxt
        return None

    def period(self, now: datetime) -> timedelta:
        """Return the time between this job's ticks around `now`."""
        if self.every is not None:
            return self.every
        trig = self.trigger()
        first = trig.get_next_fire_time(None, now)
        second = trig.get_next_fire_time(first, first + timedelta(microseconds=1)) \
            if first is not None else None
        if first is None or second is None:
            return timedelta(days=1)
        return second - first


def _micros(delta: timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def job_specs(checks: Mapping[str, Check]) -> list[JobSpec]:
    """Return the jobs every configured check asks for."""
    out = []
    for name, check in sorted(checks.items()):
        sched = check.schedule
        if sched.recent_every is not None:
            out.append(JobSpec(name, "recent", every=sched.recent_every))
        if sched.full_every is not None:
            out.append(JobSpec(name, "full", every=sched.full_every))
        elif sched.full_cron is not None:
            out.append(JobSpec(name, "full", cron=sched.full_cron, timezone=check.timezone))
    return out


TickFn = Callable[[JobSpec, datetime], Coroutine[Any, Any, str]]
"""Run one tick of a job, given its scheduled time; return what happened."""


class CheckScheduler:
    """Fire each job's ticks: in production through APScheduler, in tests through run_due."""

    def __init__(self, specs: list[JobSpec], tick: TickFn, *,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.specs = specs
        self._tick = tick
        self._clock = clock
        self._aps: AsyncIOScheduler | None = None
        # Ticks at or before these times are done (or predate this scheduler).
        start = clock()
        self._last: dict[str, datetime | None] = {s.id: s.latest_fire(start) for s in specs}

    @property
    def running(self) -> bool:
        """Return True while the APScheduler loop is started."""
        return self._aps is not None and bool(self._aps.running)

    def start(self) -> None:
        """Add one APScheduler job per spec and start firing them on the running loop."""
        aps = AsyncIOScheduler(timezone=UTC)
        for spec in self.specs:
            grace = max(1, int(spec.period(self._clock()).total_seconds() / 2))
            aps.add_job(self._fire, trigger=spec.trigger(), args=[spec], id=spec.id,
                        name=spec.id, max_instances=1, coalesce=True,
                        misfire_grace_time=grace, replace_existing=True)
        aps.start()
        self._aps = aps
        log.info("scheduler started", extra={"jobs": [s.id for s in self.specs]})

    def jobs(self) -> list[Any]:
        """Return the APScheduler jobs while started (empty otherwise)."""
        return list(self._aps.get_jobs()) if self._aps is not None else []

    def stop(self) -> None:
        """Stop firing new ticks (running ticks are the tick owner's to cancel)."""
        if self._aps is not None and self._aps.running:
            self._aps.shutdown(wait=False)
        self._aps = None

    async def _fire(self, spec: JobSpec) -> None:
        """Run the tick APScheduler just fired; its scheduled time is the latest grid point."""
        fire = spec.latest_fire(self._clock())
        if fire is None:
            return
        self._last[spec.id] = fire
        await self._tick(spec, fire)

    async def run_due(self, now: datetime) -> dict[str, str]:
        """Run every job with a tick due at `now` (missed ticks coalesce into one).

        Ticks of different checks run as concurrent tasks; returns job id → outcome.
        """
        due: list[tuple[JobSpec, datetime]] = []
        for spec in self.specs:
            fire = spec.latest_fire(now)
            last = self._last.get(spec.id)
            if fire is not None and (last is None or fire > last):
                self._last[spec.id] = fire
                due.append((spec, fire))
        tasks: dict[str, asyncio.Task[str]]
        async with asyncio.TaskGroup() as group:
            tasks = {spec.id: group.create_task(self._tick(spec, fire)) for spec, fire in due}
        return {job: task.result() for job, task in tasks.items()}
