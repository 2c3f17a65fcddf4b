"""One scenario: simulated days on real stores, with driftgauge's services driven by the clock.

Each day at 00:00 yesterday's completed tasks land in the task store; at 01:00 the sync job
runs (reporting to the run ledger over its HTTP API); 15 minutes after its summary,
driftgauge's run-closed hook reconciles the run's window; at 03:00 every check makes its
full pass; at 06:00 the ledger judges the window whose deadline passed; at 09:00 the
dashboard's query is probed; at 12:00 the canary runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI

from driftgauge.canary.service import CanaryService
from driftgauge.canary.store import CanaryStore
from driftgauge.config.frozen import Check, Config, View
from driftgauge.jobs.adapters import Adapters
from driftgauge.jobs.runner import run_check
from driftgauge.jobs.windows import full_window, recent_window
from driftgauge.ledger.hooks import ReconcileOnClose
from driftgauge.ledger.router import ledger_router
from driftgauge.ledger.service import LedgerService, exclusion_source
from driftgauge.ledger.store import LedgerStore
from driftgauge.pg.pools import open_pool
from driftgauge.state.store import StateStore
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from faults import checks as bench_checks
from faults.faults import Fault, JobPlan
from faults.syncjob import JobReport, SyncJob
from faults.world import (
    TIMEOUT,
    Shape,
    SimClock,
    Stores,
    Task,
    at,
    day_start,
    insert_tasks,
    os_client,
)

log = logging.getLogger("fault_bench.scenario")
SAMPLE_KEYS = 20
RUN_DEADLINE = 600.0


@dataclass
class Classic:
    """What the job's own outputs said, for the three alarms most teams have."""

    jobs: list[JobReport] = field(default_factory=list)
    probes: list[tuple[datetime, str]] = field(default_factory=list)
    """Dashboard probes that failed: (when, why)."""

    def copy(self) -> Classic:
        """Return an independent copy (a scenario continues another's history)."""
        return Classic(list(self.jobs), list(self.probes))


@dataclass
class Plan:
    """What one scenario runs: its fault, its checks and which detectors it drives."""

    name: str
    fault: Fault
    checks: tuple[str, ...]
    onset: int
    full_pass: bool = True
    canary: bool = True
    stop_when_fired: bool = True
    """Skip a check's later full passes once it has alarmed (only the first alarm counts)."""


class SharedAdapters:
    """Adapters by view: checks whose sides are the same view share one connection pool."""

    def __init__(self) -> None:
        self._by_view: dict[str, StoreAdapter] = {}

    async def side(self, view: View) -> StoreAdapter:
        """Return the adapter of a view, opening it on first use."""
        key = repr(view)
        if key not in self._by_view:
            self._by_view[key] = await open_adapter(view)
        return self._by_view[key]

    async def close(self) -> None:
        """Close every adapter once."""
        adapters, self._by_view = list(self._by_view.values()), {}
        for adapter in adapters:
            try:
                async with asyncio.timeout(TIMEOUT):
                    await adapter.close()
            except Exception as exc:
                log.warning("closing an adapter failed", extra={"error": repr(exc)})


def _allow() -> None:
    """Let every ledger request through (the bench's ledger app has no tokens)."""


class Simulation:
    """A scenario's stores, its driftgauge services and the simulated days between them."""

    def __init__(
        self,
        plan: Plan,
        stores: Stores,
        config: Config,
        shape: Shape,
        clock: SimClock,
        alarm_from: datetime,
        classic: Classic | None = None,
    ) -> None:
        self.plan = plan
        self.stores = stores
        self.config = config
        self.shape = shape
        self.clock = clock
        self.index = stores.index
        self.alarm_from = alarm_from
        self.classic = classic or Classic()
        self.fired: set[str] = set()
        self.reconcile_seconds = 0.0
        self._tasks: dict[int, list[Task]] = {}
        self._adapters = SharedAdapters()
        self._closers: list[Callable[[], Awaitable[Any]]] = []
        ledgered = sorted(n for n, c in config.checks.items() if c.ledger is not None)
        self._anchor = ledgered[0] if ledgered else None
        self._unledgered = sorted(n for n, c in config.checks.items() if c.ledger is None)

    async def __aenter__(self) -> Simulation:
        """Open pools, clients and driftgauge's state, ledger and canary services."""
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close everything opened."""
        await self.close()

    async def _open(self) -> None:
        self.client = os_client()
        self._closers.append(self.client.close)
        self.tasks_pool = await asyncpg.create_pool(
            self.stores.dsn, min_size=1, max_size=2, timeout=TIMEOUT, command_timeout=TIMEOUT
        )
        self._closers.append(self.tasks_pool.close)
        self.state = await StateStore.open(
            self.config.state, deadline=TIMEOUT, pool_max=3, replica=f"fault-bench:{self.plan.name}"
        )
        self._closers.append(self.state.close)
        pool = await open_pool(self.config.state, deadline=TIMEOUT, pool_max=2)
        self._closers.append(pool.close)
        self.ledger_store = LedgerStore(pool, TIMEOUT)
        self.canary_store = CanaryStore(pool, TIMEOUT)
        self.hook = ReconcileOnClose(self.config.checks, self._settled, clock=self.clock.now)
        self.ledger = LedgerService(
            self.ledger_store, self.config.checks, clock=self.clock.now, on_close=self.hook
        )
        self.canary = CanaryService(
            self.config.checks, self.canary_store, self._source, clock=self.clock.now
        )
        app = FastAPI()
        app.state.ledger = self.ledger
        app.include_router(ledger_router(_allow, _allow), prefix="/api/v1")
        self.job = SyncJob(
            self.clock,
            self.tasks_pool,
            os_client(),
            self.index,
            "http://driftgauge.bench",
            httpx.ASGITransport(app=app),
        )
        self._closers.append(self.job.client.close)
        self._closers.append(self._adapters.close)

    async def close(self) -> None:
        """Close what was opened, newest first; a failing close does not stop the others."""
        closers, self._closers = self._closers[::-1], []
        for close in closers:
            try:
                async with asyncio.timeout(TIMEOUT):
                    await close()
            except Exception as exc:
                log.warning("closing failed", extra={"error": repr(exc)})

    async def _source(self, check: Check) -> StoreAdapter:
        return await self._adapters.side(check.source)

    # The world a fault acts on.
    @property
    def onset(self) -> datetime:
        """Return when the fault switches on."""
        return day_start(self.plan.onset)

    def tasks(self, day: int) -> list[Task]:
        """Return the tasks completed on `day` in this scenario."""
        if day not in self._tasks:
            self._tasks[day] = self.plan.fault.tasks(day, self.shape, self.plan.onset)
        return self._tasks[day]

    async def run_days(self, first: int, end: int) -> None:
        """Simulate days [first, end)."""
        for day in range(first, end):
            await self._day(day)
            self._tasks.pop(day - 1, None)
        self.clock.advance_to(day_start(end))

    async def _day(self, day: int) -> None:
        self.clock.advance_to(day_start(day))
        if day >= 1:
            async with self.tasks_pool.acquire() as conn:
                await insert_tasks(conn, self.tasks(day - 1))
        fault = self.plan.fault
        if day == self.plan.onset:
            await fault.switch_on(self)
            if fault.deploy:
                await self._canary()
        steps: list[tuple[datetime, Callable[[], Awaitable[None]]]] = []
        if day >= self.plan.onset:
            for hour, minute, action in fault.events():
                steps.append((at(day, hour, minute), _bind(action, self, day)))
        if day >= 1:
            steps.append((at(day, 1), lambda: self._sync(day - 1)))
            if self.plan.full_pass:
                steps.append((at(day, 3), self._full_pass))
            steps.append((at(day, 6), self._judge_ledger))
            if self.plan.canary:
                steps.append((at(day, 12), self._canary))
        steps.append((at(day, 9), self._probe))
        for moment, step in sorted(steps, key=lambda s: s[0]):
            self.clock.advance_to(moment)
            await self._caught_up()
            await step()
            await self._run_due()

    async def _caught_up(self) -> None:
        """Refresh the index, as the simulated time since the last step would have.

        Simulated hours pass here in milliseconds, while OpenSearch makes writes visible
        on its own refresh, every second: a job killed before its own refresh would
        otherwise still hide its last writes from a run "hours" later, and from that run's
        first query but not its next ones.
        """
        try:
            await self.client.indices.refresh(index=self.index)
        except Exception as exc:  # a read-only or missing index: its reads say the rest
            log.warning("refresh failed", extra={"error": f"{type(exc).__name__}: {exc}"})

    async def _run_due(self) -> None:
        """Run the reconciliations the run-closed hook scheduled, each at its own time."""
        for pending in self.hook.pending:
            self.clock.advance_to(pending.run_at)
            await self._caught_up()
            await self.hook.run_due(self.clock.base)

    async def _sync(self, day: int) -> None:
        """Run the day's sync (one or more concurrent copies) and keep what it printed."""
        plan = self.plan.fault.job(self) if self.clock.now() >= self.onset else JobPlan()
        job = replace(self.job, mode=plan.mode, hooks=plan.hooks)
        reports = await asyncio.gather(*(job.run(day, copy) for copy in range(plan.copies)))
        self.classic.jobs.extend(reports)
        self.clock.advance_to(max(r.finished_at for r in reports))

    async def _settled(self, check: str, start: datetime, end: datetime) -> None:
        """Reconcile a ledger run's window (driftgauge's run-closed hook calls this)."""
        await self.reconcile(check, start, end, "ledger")
        if check == self._anchor:
            # The hook only knows checks fed by the job; the others reconcile the same window.
            for name in self._unledgered:
                await self.reconcile(name, start, end, "ledger")

    async def _full_pass(self) -> None:
        """Reconcile every check over its full window (its recent one if it has none)."""
        now = self.clock.now()
        for name, check in sorted(self.config.checks.items()):
            if self.plan.stop_when_fired and name in self.fired:
                continue
            sched = check.schedule
            has_full = sched.full_cron is not None or sched.full_every is not None
            start, end = full_window(check, now) if has_full else recent_window(check, now)
            await self.reconcile(name, start, end, "full" if has_full else "recent")

    async def reconcile(self, name: str, start: datetime, end: datetime, trigger: str) -> None:
        """Reconcile one check over a window through driftgauge's runner, which stores the run."""
        check = self.config.checks[name]
        now = self.clock.now()
        sides = Adapters(
            await self._adapters.side(check.source), await self._adapters.side(check.reader)
        )
        clock = time.perf_counter()
        result = await run_check(
            check,
            sides,
            self.state,
            start,
            end,
            trigger=trigger,
            now=now,
            sample_keys=SAMPLE_KEYS,
            deadline=RUN_DEADLINE,
            exclusions=exclusion_source(self.ledger.store),
        )
        self.reconcile_seconds += time.perf_counter() - clock
        if result.error is not None:
            log.warning("reconciliation failed", extra={"check": name, "error": result.error})
        elif result.status == "drift" and now >= self.alarm_from:
            self.fired.add(name)

    async def _judge_ledger(self) -> None:
        await self.ledger.evaluate_all(self.clock.now())

    async def _canary(self) -> None:
        if bench_checks.MAIN in self.canary.checks:
            await self.canary.run(bench_checks.MAIN)

    async def _probe(self) -> None:
        """Run the dashboard's own query; a 5xx (or no answer) counts for the error rate."""
        check = self.config.checks.get(bench_checks.MAIN)
        if check is None:
            return
        try:
            await self.client.search(
                index=self.index,
                body={"size": 0, "query": check.reader.filter or {"match_all": {}}},
            )
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if not isinstance(status, int) or status >= 500:
                self.classic.probes.append((self.clock.now(), f"{type(exc).__name__}: {exc}"))


def _bind(
    action: Callable[[Any, int], Awaitable[None]], world: Simulation, day: int
) -> Callable[[], Awaitable[None]]:
    async def step() -> None:
        await action(world, day)

    return step
