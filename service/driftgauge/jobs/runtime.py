"""The one job runtime: every recurring job on one clock, in one loop, with one lifecycle.

Each job fires at the times of its grid. Missed times coalesce into the latest one, a job
never overlaps itself, and a time found later than the job's grace is skipped (the next one
comes). A job with a claim runs each scheduled time on one replica of all those sharing
the state database; an unexpected exception in a job is logged and counted under the job's
loop, and the loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from driftgauge.background import survive
from driftgauge.core.clock import Clock, SystemClock
from driftgauge.core.errors import StateError
from driftgauge.jobs.schedule import every
from driftgauge.state.claims import JobClaims

log = logging.getLogger("driftgauge.jobs")
Run = Callable[[datetime], Awaitable[object]]
"""Run one scheduled time of a job, given that time; a str result names the outcome."""
ONE_OFF_GRACE = timedelta(hours=1)


class Times(Protocol):
    """When a recurring job fires (a Grid or a JobSpec)."""

    def latest_fire(self, now: datetime) -> datetime | None:
        """Return the last fire time at or before `now`."""

    def next_fire(self, now: datetime) -> datetime | None:
        """Return the first fire time after `now`."""

    def period(self, now: datetime) -> timedelta:
        """Return the time between fires around `now`."""


@dataclass(frozen=True)
class Job:
    """One job of the runtime: what runs, when, and how replicas share it."""

    id: str
    loop: str
    """The `loop` label its unexpected errors are counted under."""
    run: Run
    times: Times | None = None
    """When it recurs; None for a one-off job, which runs once at `at`."""
    at: datetime | None = None
    claim: str | None = None
    """The claim name: with one, a scheduled time runs on one replica only."""
    exclusive: bool = False
    """Hold the claim's lock while running: an attempt that outlasts the period must not
    meet the next one on another replica."""
    otherwise: Run | None = None
    """What runs instead when another replica claimed the time."""
    run_if_claim_fails: bool = False
    """Run anyway when the claim cannot be made (the state database is down)."""
    first_after: timedelta | None = None
    """Run the current time this long after the job is added, instead of waiting for the
    next one (None: the first run is at the next scheduled time)."""
    grace: timedelta | None = None
    """How late a time may still run (default half the period, at least a second)."""
    fields: dict[str, object] = field(default_factory=dict)
    """Extra log fields of the job's lines (e.g. its check)."""

    def latest(self, now: datetime) -> datetime | None:
        """Return the job's latest scheduled time at or before `now`."""
        if self.times is None:
            return self.at if self.at is not None and self.at <= now else None
        return self.times.latest_fire(now)

    def following(self, now: datetime) -> datetime | None:
        """Return the job's first scheduled time after `now`."""
        if self.times is None:
            return self.at if self.at is not None and self.at > now else None
        return self.times.next_fire(now)

    def grace_at(self, now: datetime) -> timedelta:
        """Return how late a time of this job may still run."""
        if self.grace is not None:
            return self.grace
        if self.times is None:
            return ONE_OFF_GRACE
        return max(timedelta(seconds=1), self.times.period(now) / 2)


class JobRuntime:
    """Fire every added job on the clock; `run_due(now)` and `fire(id)` drive it by hand.

    `clock` may be a plain function (a test's frozen time): times then come from it, and
    the loop waits the difference on the wall clock.
    """

    def __init__(
        self,
        clock: Clock | Callable[[], datetime] | None = None,
        *,
        claims: JobClaims | None = None,
    ) -> None:
        self.clock: Callable[[], datetime] = clock if clock is not None else SystemClock()
        self._claims = claims
        self._jobs: dict[str, Job] = {}
        self._done: dict[str, datetime | None] = {}
        """Per job, the latest time that ran (or predates the job)."""
        self._not_before: dict[str, datetime] = {}
        self._catch_up: set[str] = set()
        """Jobs whose first run is a time already past (no grace applies to it)."""
        self._busy: dict[str, asyncio.Task[str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def add(self, *jobs: Job) -> None:
        """Add (or replace) jobs; a running loop picks them up at once."""
        now = self.clock()
        for job in jobs:
            self._jobs[job.id] = job
            self._done[job.id] = None if job.times is None else job.times.latest_fire(now)
            self._not_before.pop(job.id, None)
            self._catch_up.discard(job.id)
            if job.first_after is not None and job.times is not None:
                latest = job.times.latest_fire(now)
                self._done[job.id] = None if latest is None else latest - timedelta(microseconds=1)
                self._not_before[job.id] = now + job.first_after
                self._catch_up.add(job.id)
        self._wake.set()

    def add_every(
        self, job_id: str, loop: str, period: timedelta, run: Run, *, claim: str | None = None
    ) -> None:
        """Add a job run every `period` on the epoch grid (callers need no Job of their own)."""
        self.add(Job(job_id, loop, run, every(period), claim=claim))

    def remove(self, job_id: str) -> None:
        """Stop scheduling a job (a run under way goes on)."""
        self._jobs.pop(job_id, None)
        self._done.pop(job_id, None)
        self._not_before.pop(job_id, None)
        self._catch_up.discard(job_id)

    def jobs(self) -> list[Job]:
        """Return the jobs scheduled while the loop runs (empty otherwise)."""
        return sorted(self._jobs.values(), key=lambda j: j.id) if self.running else []

    @property
    def running(self) -> bool:
        """Return True while the loop is alive."""
        return self._loop is not None and not self._loop.done()

    def start(self) -> None:
        """Start firing jobs on the running event loop."""
        if self._loop is None:
            self._loop = asyncio.create_task(self._forever(), name="driftgauge-jobs")
            log.info("jobs started", extra={"jobs": sorted(self._jobs)})

    async def stop(self, grace: float = 10.0) -> None:
        """Stop the loop, then drain every job."""
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            with suppress(asyncio.CancelledError):
                await loop
        await self.drain(grace)

    async def drain(self, grace: float = 10.0, *, keep: Collection[str] = ()) -> None:
        """Unschedule every job but `keep`, cancel their runs and wait (bounded) for them.

        A cancelled run records itself as it ends (a reconcile run as interrupted).
        """
        for job_id in [j for j in self._jobs if j not in keep]:
            self.remove(job_id)
        tasks = [t for job_id, t in self._busy.items() if job_id not in keep and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    async def run_due(self, now: datetime | None = None) -> dict[str, str]:
        """Run every job with a time due at `now`, concurrently; return job id → outcome."""
        due = self._due(self.clock() if now is None else now)
        tasks: dict[str, asyncio.Task[str]]
        async with asyncio.TaskGroup() as group:
            tasks = {job.id: group.create_task(self._run(job, at)) for job, at in due}
        return {job: task.result() for job, task in tasks.items()}

    async def fire(self, job_id: str, now: datetime | None = None) -> str:
        """Run a job's latest scheduled time now, claimed and counted as the loop would."""
        job = self._jobs[job_id]
        at = job.latest(self.clock() if now is None else now)
        if at is None:
            return "not-due"
        return await self._run(job, at)

    async def claim(self, job_id: str, now: datetime | None = None) -> bool:
        """Return True if this replica takes the job's latest scheduled time."""
        job = self._jobs[job_id]
        at = job.latest(self.clock() if now is None else now)
        return at is None or await self._claim(job, at) is None

    def _due(self, now: datetime) -> list[tuple[Job, datetime]]:
        due = []
        for job in list(self._jobs.values()):
            if now < self._not_before.get(job.id, now):
                continue
            at = job.latest(now)
            done = self._done.get(job.id)
            if at is None or (done is not None and at <= done):
                continue
            self._done[job.id] = at
            if job.times is None:
                self.remove(job.id)
            due.append((job, at))
        return due

    async def _forever(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock()
            for job, at in self._due(now):
                self._start(job, at, now)
            await self._sleep(self._next_wake(now))

    def _start(self, job: Job, at: datetime, now: datetime) -> None:
        extra = {"job": job.id, "scheduled_for": at.isoformat(), **job.fields}
        busy = self._busy.get(job.id)
        if busy is not None and not busy.done():
            log.warning("job skipped: its previous run still runs", extra=extra)
            return
        late = job.id not in self._catch_up and now - at > job.grace_at(now)
        self._catch_up.discard(job.id)
        if late:
            log.warning("job skipped: found too late for its time", extra=extra)
            return
        task = asyncio.create_task(self._run(job, at), name=f"driftgauge-job-{job.id}")
        self._busy[job.id] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _next_wake(self, now: datetime) -> datetime | None:
        times = [
            t
            for job in self._jobs.values()
            for t in (job.following(now), self._not_before.get(job.id))
            if t is not None
        ]
        # A time already due but not yet run (its job was busy) waits for the next one.
        return min((t for t in times if t > now), default=None)

    async def _sleep(self, until: datetime | None) -> None:
        waits: list[asyncio.Task[Any]] = [asyncio.create_task(self._wake.wait())]
        if until is not None:
            waits.append(asyncio.create_task(self._sleep_until(until)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _sleep_until(self, when: datetime) -> None:
        if isinstance(self.clock, Clock):
            await self.clock.sleep_until(when)
        else:
            await asyncio.sleep(max(0.0, (when - self.clock()).total_seconds()))

    async def _run(self, job: Job, at: datetime) -> str:
        outcome = "error"
        with survive(job.loop, job.id, scheduled_for=at.isoformat(), **job.fields):
            outcome = await self._claimed(job, at)
        return outcome

    async def _claimed(self, job: Job, at: datetime) -> str:
        if job.exclusive and job.claim is not None and self._claims is not None:
            return await self._exclusive(job, at)
        skipped = await self._claim(job, at)
        if skipped is None:
            return _outcome(await job.run(at))
        if skipped == "taken" and job.otherwise is not None:
            await job.otherwise(at)
        return skipped

    async def _exclusive(self, job: Job, at: datetime) -> str:
        assert self._claims is not None and job.claim is not None
        extra = {"job": job.id, **job.fields}
        try:
            async with self._claims.lock(job.claim) as got:
                if not got:
                    log.warning("job skipped: the previous attempt still runs", extra=extra)
                    return "busy"
                skipped = await self._claim(job, at)
                if skipped is not None:
                    return skipped
                return _outcome(await job.run(at))
        except StateError as exc:
            log.warning("job skipped: state database", extra={**extra, "error": str(exc)})
            return "state-error"

    async def _claim(self, job: Job, at: datetime) -> str | None:
        """Claim the time; return None to run it, else why not ("taken", "state-error")."""
        if job.claim is None or self._claims is None:
            return None
        extra = {"job": job.id, "scheduled_for": at.isoformat(), **job.fields}
        try:
            if await self._claims.claim(job.claim, at):
                return None
        except StateError as exc:
            if job.run_if_claim_fails:
                return None  # the run will fail too, and say why
            log.warning("job skipped: could not claim its time", extra={**extra, "error": str(exc)})
            return "state-error"
        log.info("job skipped: another replica runs it", extra=extra)
        return "taken"


def _outcome(result: object) -> str:
    return result if isinstance(result, str) else "ran"
