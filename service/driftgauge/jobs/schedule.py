"""When jobs fire: grids anchored near the Unix epoch (or cron times), aligned across replicas.

Interval jobs fire on a grid anchored at a fixed instant (the epoch, or for a check's
reconcile jobs the epoch's local midnight plus the check's settle), so every replica fires
the same time at the same instant and the state database can let exactly one of them run
it. Per check there is a recent-window job and a full-history job.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from apscheduler.triggers.interval import IntervalTrigger

from driftgauge.config.frozen import Check
from driftgauge.core.clock import EPOCH
from driftgauge.jobs.cron_trigger import CronTrigger, trigger_for

JobKind = Literal["recent", "full"]
_LOOKBACKS = [
    timedelta(minutes=1),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=8),
    timedelta(days=32),
    timedelta(days=367),
]


@dataclass(frozen=True, kw_only=True)
class Grid:
    """The times a recurring job fires: every `every` from `anchor`, or a cron expression."""

    every: timedelta | None = None
    cron: str | None = None
    timezone: Any = UTC
    anchor: datetime = EPOCH

    def trigger(self) -> IntervalTrigger | CronTrigger:
        """Return the trigger that computes these times."""
        if self.every is not None:
            return IntervalTrigger(
                seconds=self.every.total_seconds(), start_date=self.anchor, timezone=UTC
            )
        if self.cron is None:
            raise ValueError("neither an interval nor a cron expression")
        return trigger_for(self.cron, self.timezone)

    def latest_fire(self, now: datetime) -> datetime | None:
        """Return the last fire time at or before `now`."""
        if self.every is not None:
            step = _micros(self.every)
            since = _micros(now - self.anchor)
            return self.anchor + timedelta(microseconds=(since // step) * step)
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

    def next_fire(self, now: datetime) -> datetime | None:
        """Return the first fire time after `now`."""
        if self.every is not None:
            latest = self.latest_fire(now)
            return None if latest is None else latest + self.every
        t = self.trigger().get_next_fire_time(None, now + timedelta(microseconds=1))
        return None if t is None else t.astimezone(UTC)

    def period(self, now: datetime) -> timedelta:
        """Return the time between this grid's fires around `now`."""
        if self.every is not None:
            return self.every
        trig = self.trigger()
        first = trig.get_next_fire_time(None, now)
        second = (
            trig.get_next_fire_time(first, first + timedelta(microseconds=1))
            if first is not None
            else None
        )
        if first is None or second is None:
            return timedelta(days=1)
        return second - first


def every(delta: timedelta) -> Grid:
    """Return the grid of fires every `delta` from the epoch."""
    return Grid(every=delta)


@dataclass(frozen=True)
class JobSpec(Grid):
    """One scheduled reconcile job: a check, which window it covers, and its grid."""

    check: str
    kind: JobKind

    @property
    def id(self) -> str:
        """Return the job's id: `check:kind`."""
        return f"{self.check}:{self.kind}"

    def trigger(self) -> IntervalTrigger | CronTrigger:
        """Return the trigger for this job, naming the job when it has no times."""
        try:
            return super().trigger()
        except ValueError as exc:
            raise ValueError(f"job {self.id}: {exc}") from None


def _micros(delta: timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def settled_anchor(check: Check) -> datetime:
    """Return where a check's interval grids start: a local midnight plus its settle.

    A day bucket is judged once `settle` has passed since its end. On a grid anchored at
    00:00 a daily run fires just before yesterday settles, finds it settling and judges
    it a day late; from midnight plus settle, every run whose period divides a day
    fires once the day before it has settled.
    """
    # The later of the zone's two midnights (standard and summer time): a run then fires
    # after yesterday settles all year, an hour later than needed for half of it. A fixed
    # year, so every replica computes the same grid; a recent one, for today's offsets.
    offsets = [check.timezone.utcoffset(datetime(2025, month, 1)) for month in (1, 7)]
    return EPOCH - min(o or timedelta(0) for o in offsets) + check.settle


def job_specs(checks: Mapping[str, Check]) -> list[JobSpec]:
    """Return the jobs every configured check asks for."""
    out = []
    for name, check in sorted(checks.items()):
        sched = check.schedule
        anchor = settled_anchor(check)
        if sched.recent_every is not None:
            out.append(JobSpec(name, "recent", every=sched.recent_every, anchor=anchor))
        if sched.full_every is not None:
            out.append(JobSpec(name, "full", every=sched.full_every, anchor=anchor))
        elif sched.full_cron is not None:
            out.append(JobSpec(name, "full", cron=sched.full_cron, timezone=check.timezone))
    return out


COLLISION_SAMPLE = 8
"""How many of a full schedule's times are compared with the recent grid."""


def collisions(checks: Mapping[str, Check], now: datetime) -> list[str]:
    """Return a warning per check whose full pass always falls due with a recent tick.

    Such a pass waits for the recent run (docs/algorithm.md), every time: worth knowing
    when a run is long, and a shift of the full schedule off the recent grid avoids it.
    """
    out = []
    specs = {(s.check, s.kind): s for s in job_specs(checks)}
    for name in sorted(checks):
        recent, full = specs.get((name, "recent")), specs.get((name, "full"))
        if recent is None or full is None:
            continue
        times: list[datetime] = []
        t = full.next_fire(now)
        while t is not None and len(times) < COLLISION_SAMPLE:
            times.append(t)
            t = full.next_fire(t)
        if times and all(recent.latest_fire(t) == t for t in times):
            out.append(
                f"checks.{name}.schedule: every full pass falls due with a recent tick;"
                " it runs once the recent run ends (move it off the recent grid to start on time)"
            )
    return out


TickFn = Callable[[JobSpec, datetime], Coroutine[Any, Any, str]]
"""Run one tick of a job, given its scheduled time; return what happened."""
