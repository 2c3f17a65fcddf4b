"""What one tick does: take the check's lock, claim the tick, run, record; owned tasks only."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from functools import partial

from driftgauge.config.frozen import Check
from driftgauge.core.clock import utc_now
from driftgauge.core.errors import DriftgaugeError, StateError
from driftgauge.engine.result import RunResult
from driftgauge.jobs.adapters import AdapterPool
from driftgauge.jobs.runner import ExclusionSource, run_check
from driftgauge.jobs.schedule import JobSpec
from driftgauge.jobs.windows import window_for
from driftgauge.logs import log_context
from driftgauge.state.store import KeyHasher, StateStore

log = logging.getLogger("driftgauge.ticks")
MIN_DEADLINE = timedelta(minutes=10)
Listener = Callable[[str], Awaitable[None]]


class CheckBusy(DriftgaugeError):
    """A run of this check is already in progress (here or on another replica)."""


@dataclass(eq=False)
class TickRunner:
    """Run scheduled ticks and manual runs, never two runs of one check at once.

    In this process a lock per check serialises its jobs; across replicas a PostgreSQL
    advisory lock does, and the run table accepts one run per scheduled tick.
    """

    checks: Mapping[str, Check]
    state: StateStore
    adapters: AdapterPool
    _: KW_ONLY
    sample_keys: int = 100
    clock: Callable[[], datetime] = utc_now
    deadline: float | None = None
    on_change: Listener | None = None
    key_hash: Callable[[Check], KeyHasher | None] | None = None
    busy_poll: float = 2.0
    """Seconds between tries of a check's lock that another replica holds."""
    max_runs: int = 16
    """Runs this process makes at once (state.max_concurrent_runs); more wait their turn."""
    exclusions: ExclusionSource | None = field(default=None, init=False)
    """Set by the app once the run ledger is open; runs then excuse what it reports."""
    _locks: dict[str, asyncio.Lock] = field(init=False)
    _tasks: set[asyncio.Task[object]] = field(default_factory=set, init=False)
    _full_started: dict[str, datetime] = field(default_factory=dict, init=False)
    """Per check, when this process last began a full run (it judges the recent days too)."""

    def __post_init__(self) -> None:
        self._locks = {name: asyncio.Lock() for name in self.checks}
        # Each run holds a dedicated state connection for its check's lock: the slots, not
        # the number of checks, bound them. asyncio.Semaphore serves waiters in order.
        self._slots = asyncio.Semaphore(self.max_runs)

    def busy(self, check: str) -> bool:
        """Return True while this process runs the check."""
        return self._locks[check].locked()

    def _deadline_for(self, period: timedelta) -> float:
        if self.deadline is not None:
            return self.deadline
        return max(MIN_DEADLINE, period).total_seconds()

    async def tick(self, spec: JobSpec, scheduled_for: datetime) -> str:
        """Run one scheduled tick unless another run holds the check; return the outcome."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            with log_context(check=spec.check, job=spec.kind):
                return await self._tick(spec, scheduled_for)
        finally:
            if task is not None:
                self._tasks.discard(task)
            await self._changed(spec.check)

    async def _tick(self, spec: JobSpec, scheduled_for: datetime) -> str:
        check = self.checks[spec.check]
        # A tick that finds its check running waits and runs right after: dropped as busy,
        # it would meet the same run at its next time (an hourly recent tick holds the
        # check at 03:00 every night), and a daily full pass would never run.
        async with self._locks[check.name]:
            if self._subsumed(check, spec.kind, scheduled_for):
                log.info("tick subsumed: a full run since its time judged its window")
                return "subsumed"
            limit = self._deadline_for(spec.period(self.clock()))
            outcome = await self._until_free(
                partial(self._locked_tick, check, spec, scheduled_for), limit
            )
            if outcome == "busy":
                log.warning(
                    "tick skipped: another replica held the check past the deadline",
                    extra={"scheduled_for": scheduled_for.isoformat(), "waited_s": limit},
                )
            return outcome

    async def _until_free(self, attempt: Callable[[], Awaitable[str]], limit: float) -> str:
        """Try `attempt` every busy_poll seconds while another replica holds the check."""
        waited = 0.0
        while True:
            outcome = await attempt()
            if outcome != "busy" or waited >= limit:
                return outcome
            await asyncio.sleep(self.busy_poll)
            waited += self.busy_poll

    def _subsumed(self, check: Check, kind: str, scheduled_for: datetime) -> bool:
        """Return True if a full run that began after this recent tick's time covers it."""
        full = self._full_started.get(check.name)
        return (
            kind == "recent"
            and full is not None
            and full >= scheduled_for
            and check.schedule.full_days >= check.schedule.recent_days
        )

    async def _locked_tick(self, check: Check, spec: JobSpec, scheduled_for: datetime) -> str:
        """Run the tick under the check's advisory lock; "busy" if another replica holds it."""
        try:
            async with self._slots, self.state.check_lock(check.name) as got:
                if not got:
                    log.info("tick waits: another replica is running the check")
                    return "busy"
                now = self.clock()
                period = spec.period(now)
                start, end = window_for(check, spec.kind, now)
                run_id = await self.state.claim_tick(
                    check.name,
                    start,
                    end,
                    trigger=spec.kind,
                    scheduled_for=scheduled_for,
                    started_at=now,
                    guard=period / 2,
                )
                if run_id is None:
                    log.info(
                        "tick skipped: another replica ran it",
                        extra={"scheduled_for": scheduled_for.isoformat()},
                    )
                    return "taken"
                if spec.kind == "full":
                    self._full_started[check.name] = now
                result = await self._run(check, run_id, start, end, now, spec.kind, period)
                return f"ran:{result.status}"
        except StateError as exc:
            log.error("tick failed: state database", extra={"error": str(exc)})
            return "state-error"

    async def _run(
        self,
        check: Check,
        run_id: int,
        start: datetime,
        end: datetime,
        now: datetime,
        trigger: str,
        period: timedelta,
    ) -> RunResult:
        """Run the begun run `run_id` with this runner's stores, deadline and exclusions."""
        return await run_check(
            check,
            self.adapters.getter(check.name),
            self.state,
            start,
            end,
            trigger=trigger,
            now=now,
            sample_keys=self.sample_keys,
            deadline=self._deadline_for(period),
            key_hash=self.key_hash(check) if self.key_hash is not None else None,
            exclusions=self.exclusions,
            run_id=run_id,
        )

    async def trigger(self, check_name: str, kind: str = "manual", window: str = "recent") -> int:
        """Start a run of the check now as an owned task; return its run id once begun.

        Raises CheckBusy when the check is running here or on another replica.
        """
        if self._locks[check_name].locked():
            raise CheckBusy(f"check {check_name!r} is already running")
        begun: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            self._manual(check_name, kind, window, begun), name=f"driftgauge-run-{check_name}"
        )
        self._own(task)
        try:
            return await asyncio.shield(begun)
        except asyncio.CancelledError:
            task.cancel()
            raise

    async def _manual(
        self, check_name: str, kind: str, window: str, begun: asyncio.Future[int]
    ) -> None:
        check = self.checks[check_name]
        try:
            with log_context(check=check_name, job=kind):
                await self._run_manual(check, kind, window, begun)
        except BaseException as exc:
            if not begun.done():
                begun.set_exception(
                    exc if isinstance(exc, Exception) else CheckBusy("the service is shutting down")
                )
            if not isinstance(exc, Exception):
                raise
        finally:
            await self._changed(check_name)

    async def _run_manual(
        self, check: Check, kind: str, window: str, begun: asyncio.Future[int]
    ) -> None:
        lock = self._locks[check.name]
        if lock.locked():
            raise CheckBusy(f"check {check.name!r} is already running")
        async with lock, self._slots, self.state.check_lock(check.name) as got:
            if not got:
                raise CheckBusy(f"check {check.name!r} is running on another replica")
            now = self.clock()
            start, end = window_for(check, window, now)
            run_id = await self.state.begin_run(
                check.name, start, end, trigger=kind, started_at=now
            )
            begun.set_result(run_id)
            period = check.schedule.recent_every or timedelta(hours=1)
            await self._run(check, run_id, start, end, now, kind, period)

    async def run_after(self, check_name: str, start: datetime, end: datetime) -> str:
        """Run the check's recent window for a ledger run once no other run holds the check.

        A closed ledger run's reconcile is never dropped for being busy: it waits for this
        process's run of the check, then polls another replica's lock up to the deadline.
        `start` and `end` (the ledger window) lie inside the recent window it judges.
        """
        check = self.checks[check_name]
        period = check.schedule.recent_every or timedelta(hours=1)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            with log_context(check=check_name, job="ledger"):
                async with self._locks[check_name]:
                    outcome = await self._until_free(
                        partial(self._locked_ledger, check, period), self._deadline_for(period)
                    )
                if outcome == "busy":
                    log.warning(
                        "ledger reconcile skipped: another replica held the check past the"
                        " deadline",
                        extra={"window": f"{start.isoformat()}/{end.isoformat()}"},
                    )
                return outcome
        finally:
            if task is not None:
                self._tasks.discard(task)
            await self._changed(check_name)

    async def _locked_ledger(self, check: Check, period: timedelta) -> str:
        """Run a ledger-triggered run under the check's advisory lock; "busy" if held."""
        try:
            async with self._slots, self.state.check_lock(check.name) as got:
                if not got:
                    return "busy"
                now = self.clock()
                start, end = window_for(check, "recent", now)
                run_id = await self.state.begin_run(
                    check.name, start, end, trigger="ledger", started_at=now
                )
                result = await self._run(check, run_id, start, end, now, "ledger", period)
                return f"ran:{result.status}"
        except StateError as exc:
            log.error("ledger run failed: state database", extra={"error": str(exc)})
            return "state-error"

    def _own(self, task: asyncio.Task[object]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._reap)

    def _reap(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if not isinstance(exc, CheckBusy):
                log.error("run task failed", extra={"error": f"{type(exc).__name__}: {exc}"})

    async def _changed(self, check: str) -> None:
        if self.on_change is None:
            return
        try:
            await self.on_change(check)
        except DriftgaugeError as exc:
            log.warning("refreshing results after a run failed", extra={"error": str(exc)})

    async def shutdown(self, grace: float = 10.0) -> None:
        """Cancel every running tick and manual run, and wait (bounded) for them to record it."""
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
