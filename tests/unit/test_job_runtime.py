"""The job runtime on a clock the test moves: times fire, claims hold, errors count, stop drains."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import pytest

from driftgauge import background
from driftgauge.core.clock import ManualClock
from driftgauge.core.errors import StateError
from driftgauge.jobs.runtime import Job, JobRuntime
from driftgauge.jobs.schedule import every

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


class SharedClaims:
    """Our own in-memory job_claims table, shared by runtimes as replicas share the database."""

    def __init__(self) -> None:
        self.taken: dict[tuple[str, datetime], str] = {}
        self.locked: set[str] = set()
        self.down = False

    def replica(self, name: str) -> ReplicaClaims:
        """Return the claims one replica makes."""
        return ReplicaClaims(self, name)


class ReplicaClaims:
    """One replica's view of the shared claims (the JobClaims interface)."""

    def __init__(self, shared: SharedClaims, replica: str) -> None:
        self.shared = shared
        self.replica = replica

    async def claim(self, job: str, scheduled_for: datetime) -> bool:
        if self.shared.down:
            raise StateError("state database unreachable")
        await asyncio.sleep(0)  # let the other replica interleave
        if (job, scheduled_for) in self.shared.taken:
            return False
        self.shared.taken[(job, scheduled_for)] = self.replica
        return True

    @asynccontextmanager
    async def lock(self, job: str) -> AsyncIterator[bool]:
        if job in self.shared.locked:
            yield False
            return
        self.shared.locked.add(job)
        try:
            yield True
        finally:
            self.shared.locked.discard(job)


class Fired(list[datetime]):
    """A job's run that notes each scheduled time it is run for, in order."""

    async def __call__(self, at: datetime) -> None:
        self.append(at)


async def settle() -> None:
    """Let the loop and the runs it started go as far as they can."""
    for _ in range(20):
        await asyncio.sleep(0)


async def move_to(clock: ManualClock, when: datetime) -> None:
    """Set the clock to `when` and let whatever that makes due run as far as it can."""
    await clock.set(when)
    await settle()


async def move_by(clock: ManualClock, step: timedelta) -> None:
    """Move the clock on by `step` and let whatever that makes due run as far as it can."""
    await clock.advance(step)
    await settle()


async def until(cond: Callable[[], bool]) -> None:
    """Wait (at most 5 s) until `cond()` holds, yielding to the loop."""
    async with asyncio.timeout(5):
        while not cond():  # noqa: ASYNC110  (the condition is the runtime's, not an event's)
            await asyncio.sleep(0)


async def test_a_job_fires_at_each_scheduled_time_of_the_clock() -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    fired = Fired()
    jobs = JobRuntime(clock)
    jobs.add(Job("every-5m", "audit", fired, every(5 * MINUTE)))
    jobs.start()
    try:
        await settle()
        assert fired == []  # the time before the start is not run
        await move_to(clock, T0 + 4 * MINUTE)
        assert fired == []
        await clock.set(T0 + 5 * MINUTE)
        await until(lambda: len(fired) == 1)
        await move_to(clock, T0 + 7 * MINUTE)
        # Three periods pass at once: the missed times coalesce into the latest one.
        await clock.set(T0 + 20 * MINUTE + timedelta(seconds=1))
        await until(lambda: len(fired) == 2)
        await settle()
    finally:
        await jobs.stop()
    assert fired == [T0 + 5 * MINUTE, T0 + 20 * MINUTE]


async def test_a_one_off_job_runs_once_at_its_time() -> None:
    clock = ManualClock(T0)
    fired = Fired()
    jobs = JobRuntime(clock)
    jobs.start()
    try:
        jobs.add(Job("once", "ledger_reconcile", fired, at=T0 + 2 * MINUTE))
        await move_to(clock, T0 + MINUTE)
        assert fired == []
        await clock.set(T0 + 3 * MINUTE)
        await until(lambda: len(fired) == 1)
        await move_to(clock, T0 + 10 * MINUTE)
    finally:
        await jobs.stop()
    assert fired == [T0 + 2 * MINUTE]


async def test_a_claimed_time_runs_once_across_two_runtimes_sharing_the_claims() -> None:
    clock = ManualClock(T0)
    shared = SharedClaims()
    ran: list[tuple[str, datetime]] = []
    instead: list[tuple[str, datetime]] = []
    replicas = []
    for name in ("replica-0", "replica-1"):

        async def run(at: datetime, name: str = name) -> None:
            ran.append((name, at))

        async def otherwise(at: datetime, name: str = name) -> None:
            instead.append((name, at))

        rt = JobRuntime(clock, claims=shared.replica(name))  # type: ignore[arg-type]
        rt.add(
            Job("judge", "audit", run, every(MINUTE), claim="ledger-deadlines", otherwise=otherwise)
        )
        replicas.append(rt)
    for rt in replicas:
        rt.start()
    try:
        for i in (1, 2, 3):
            await clock.set(T0 + i * MINUTE)
            await until(lambda i=i: len(ran) + len(instead) == 2 * i)  # type: ignore[misc]
    finally:
        for rt in replicas:
            await rt.stop()
    assert sorted(at for _, at in ran) == [T0 + i * MINUTE for i in (1, 2, 3)]
    assert sorted(at for _, at in instead) == [T0 + i * MINUTE for i in (1, 2, 3)]
    assert {(who, at) for (_, at), who in shared.taken.items()} == set(ran)


async def test_an_exclusive_job_is_skipped_while_another_replica_holds_its_lock() -> None:
    shared = SharedClaims()
    ran = Fired()

    rt = JobRuntime(lambda: T0 + timedelta(seconds=5), claims=shared.replica("replica-0"))  # type: ignore[arg-type]
    rt.add(Job("c:canary", "canary", ran, every(MINUTE), claim="canary:c", exclusive=True))
    shared.locked.add("canary:c")
    assert await rt.fire("c:canary") == "busy"
    assert ran == [] and shared.taken == {}
    shared.locked.clear()
    assert await rt.fire("c:canary") == "ran"
    assert ran == [T0] and shared.taken == {("canary:c", T0): "replica-0"}


async def test_a_claim_the_state_database_refuses_skips_the_time_uncounted() -> None:
    shared = SharedClaims()
    shared.down = True
    ran = Fired()

    rt = JobRuntime(lambda: T0, claims=shared.replica("replica-0"))  # type: ignore[arg-type]
    rt.add(
        Job("retention", "retention", ran, every(timedelta(days=1)), claim="retention"),
        Job(
            "audit", "audit", ran, every(MINUTE), claim="ledger-deadlines", run_if_claim_fails=True
        ),
    )
    before = background.errors("retention")
    assert await rt.fire("retention") == "state-error"
    assert background.errors("retention") == before
    assert await rt.fire("audit") == "ran"  # judging fails on its own, and says why
    assert ran == [T0]


async def test_a_job_that_raises_is_counted_and_the_loop_goes_on() -> None:
    clock = ManualClock(T0)
    calls: list[datetime] = []

    async def flaky(at: datetime) -> None:
        calls.append(at)
        if len(calls) == 1:
            raise ValueError("a stored row that does not decode")

    jobs = JobRuntime(clock)
    jobs.add(Job("reload", "snapshot_refresh", flaky, every(MINUTE)))
    before = background.errors("snapshot_refresh")
    jobs.start()
    try:
        await clock.set(T0 + MINUTE)
        await until(lambda: background.errors("snapshot_refresh") == before + 1)
        await clock.set(T0 + 2 * MINUTE)
        await until(lambda: len(calls) == 2)
        assert jobs.running
    finally:
        await jobs.stop()
    assert background.errors("snapshot_refresh") == before + 1


async def test_a_job_never_overlaps_itself() -> None:
    clock = ManualClock(T0)
    release = asyncio.Event()
    started: list[datetime] = []

    async def slow(at: datetime) -> None:
        started.append(at)
        await release.wait()

    jobs = JobRuntime(clock)
    jobs.add(Job("slow", "audit", slow, every(MINUTE)))
    jobs.start()
    try:
        await clock.set(T0 + MINUTE)
        await until(lambda: len(started) == 1)
        await clock.set(T0 + 2 * MINUTE)  # the first run still runs: this time is skipped
        await settle()
        assert started == [T0 + MINUTE]
        release.set()
        await settle()
        await clock.set(T0 + 3 * MINUTE)
        await until(lambda: len(started) == 2)
    finally:
        await jobs.stop()
    assert started == [T0 + MINUTE, T0 + 3 * MINUTE]


async def test_first_after_runs_the_current_time_once_that_long_after_the_start() -> None:
    clock = ManualClock(T0 + timedelta(hours=5))
    fired = Fired()
    jobs = JobRuntime(clock)
    jobs.add(
        Job(
            "retention",
            "retention",
            fired,
            every(timedelta(days=1)),
            first_after=timedelta(minutes=10),
        )
    )
    jobs.start()
    try:
        await move_by(clock, timedelta(minutes=9))
        assert fired == []
        # Hours past the day's time, yet it runs: the first run catches up.
        await clock.advance(timedelta(minutes=1))
        await until(lambda: len(fired) == 1)
        await move_by(clock, timedelta(hours=1))
    finally:
        await jobs.stop()
    assert fired == [datetime(2026, 3, 10, tzinfo=UTC)]


async def test_stop_cancels_the_runs_under_way_and_waits_for_them_to_record() -> None:
    clock = ManualClock(T0)
    recorded: list[str] = []
    began = asyncio.Event()

    async def run(at: datetime) -> None:
        began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # recording an interrupted run takes a moment
            recorded.append("interrupted")
            raise

    jobs = JobRuntime(clock)
    jobs.add(Job("tick", "ticks", run, every(MINUTE)))
    jobs.start()
    await clock.set(T0 + MINUTE)
    await asyncio.wait_for(began.wait(), 5)
    await jobs.stop(grace=5)
    assert recorded == ["interrupted"]
    assert not jobs.running and jobs.jobs() == []


async def test_drain_keeps_the_named_jobs_running() -> None:
    clock = ManualClock(T0)
    beats = Fired()

    async def tick(at: datetime) -> None:
        raise AssertionError("drained jobs must not fire")

    jobs = JobRuntime(clock)
    jobs.add(
        Job("heartbeat", "heartbeat", beats, every(MINUTE)),
        Job("tick", "ticks", tick, every(MINUTE)),
    )
    jobs.start()
    try:
        await jobs.drain(keep={"heartbeat"})
        await clock.set(T0 + MINUTE)
        await until(lambda: len(beats) == 1)
    finally:
        await jobs.stop()
    assert beats == [T0 + MINUTE]


@pytest.mark.parametrize("now", [T0, T0 + timedelta(seconds=59)])
async def test_fire_runs_the_latest_time_and_run_due_only_new_ones(now: datetime) -> None:
    fired: list[datetime] = []

    async def run(at: datetime) -> str:
        fired.append(at)
        return "done"

    jobs = JobRuntime(lambda: now)
    jobs.add(Job("j", "audit", run, every(MINUTE)))
    assert await jobs.run_due(now) == {}
    assert await jobs.fire("j") == "done"
    assert await jobs.run_due(T0 + MINUTE) == {"j": "done"}
    assert fired == [T0, T0 + MINUTE]
