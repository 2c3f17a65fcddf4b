"""Every recurring job of the service, as the runtime runs it: when, which loop, which claim."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from functools import partial

from driftgauge.canary.service import CanaryService
from driftgauge.config.frozen import Check
from driftgauge.core.errors import StateError
from driftgauge.jobs.heartbeat import LeaseKeeper
from driftgauge.jobs.runtime import Job, Run
from driftgauge.jobs.schedule import Grid, JobSpec, TickFn, every, settled_anchor
from driftgauge.ledger.hooks import PendingReconcile, ReconcileOnClose
from driftgauge.metrics.snapshot import SnapshotCache
from driftgauge.retention.job import RetentionJob
from driftgauge.signals.service import SignalsService
from driftgauge.state.election import ExporterElection

log = logging.getLogger("driftgauge.jobs")
DEFAULT_CANARY_CRON = "0 12 * * *"
# A canary found this late still runs: it checks the path, not a window.
CANARY_GRACE = timedelta(minutes=5)
SIGNALS_EVERY = timedelta(hours=1)
HEARTBEAT = "heartbeat"
EXPORTER_EVERY = timedelta(seconds=5)
"""How often a replica asks for the exporter lock: how soon another takes over a dead one."""
Thunk = Callable[[], Awaitable[object]]


def _ignore_time(run: Thunk) -> Run:
    """Return `run` as a job's run: these jobs read the clock themselves."""

    async def at_time(_: datetime) -> object:
        return await run()

    return at_time


def tick_jobs(specs: list[JobSpec], tick: TickFn) -> list[Job]:
    """Return one job per reconcile schedule; the ticks claim their own times (run table)."""
    return [
        Job(spec.id, "ticks", partial(tick, spec), spec, fields={"check": spec.check})
        for spec in specs
    ]


def canary_grid(check: Check) -> Grid:
    """Return when a check's canary fires: its interval, else its cron (default daily noon)."""
    canary = check.canary
    if canary is None:
        raise ValueError(f"check {check.name!r} has no canary")
    if canary.every is not None:
        return every(canary.every)
    return Grid(cron=canary.cron or DEFAULT_CANARY_CRON, timezone=check.timezone)


def canary_jobs(checks: Mapping[str, Check], canary: CanaryService) -> list[Job]:
    """Return one job per canary, exclusive: two writers would read back each other's token."""
    return [
        _check_job(
            "canary", name, canary.scheduled, canary_grid(check), exclusive=True, grace=CANARY_GRACE
        )
        for name, check in sorted(checks.items())
        if check.canary is not None
    ]


def signals_grid(check: Check) -> Grid:
    """Return when a check's vocabulary and volume are measured: its recent interval.

    On the reconcile jobs' grid, so a daily measurement counts yesterday once it settled.
    """
    return Grid(every=check.schedule.recent_every or SIGNALS_EVERY, anchor=settled_anchor(check))


def signals_jobs(checks: Mapping[str, Check], signals: SignalsService) -> list[Job]:
    """Return one measurement job per check with vocabulary or volume settings."""
    return [
        _check_job("signals", name, signals.scheduled, signals_grid(checks[name]))
        for name in signals.checks
    ]


def _check_job(
    loop: str,
    check: str,
    scheduled: Callable[[str], Awaitable[object]],
    times: Grid,
    *,
    exclusive: bool = False,
    grace: timedelta | None = None,
) -> Job:
    """Return a check's `loop` job, claimed per check so one replica runs each time."""
    return Job(
        f"{check}:{loop}",
        loop,
        _ignore_time(partial(scheduled, check)),
        times,
        claim=f"{loop}:{check}",
        exclusive=exclusive,
        grace=grace,
        fields={"check": check},
    )


def audit_job(judge_and_reload: Thunk, reload: Thunk, period: float) -> Job:
    """Return the audit job: one replica judges the ledger deadlines, every one reloads."""
    return Job(
        "audit",
        "audit",
        _ignore_time(judge_and_reload),
        every(timedelta(seconds=period)),
        claim="ledger-deadlines",
        otherwise=_ignore_time(reload),
        run_if_claim_fails=True,
    )


def retention_job(job: RetentionJob) -> Job:
    """Return the prune: one replica a period, the first a while after start-up."""
    return Job(
        "retention",
        "retention",
        lambda at: job.run_once(),
        every(job.every),
        claim="retention",
        first_after=job.first_after,
    )


def refresh_job(snapshots: SnapshotCache, period: float) -> Job:
    """Return the reload of stored results, so runs made by other replicas show up."""

    async def reload(_: datetime) -> None:
        try:
            await snapshots.refresh()
        except StateError as exc:
            log.warning("could not refresh stored results", extra={"error": str(exc)})

    return Job("snapshot_refresh", "snapshot_refresh", reload, every(timedelta(seconds=period)))


def exporter_job(election: ExporterElection) -> Job:
    """Return the exporter election's attempts: every replica, every few seconds."""

    async def attempt(_: datetime) -> None:
        try:
            await election.attempt()
        except StateError as exc:
            log.warning("could not hold the exporter lock", extra={"error": str(exc)})

    return Job("exporter", "exporter", attempt, every(EXPORTER_EVERY))


def heartbeat_job(leases: LeaseKeeper) -> Job:
    """Return the heartbeat: every replica renews its own runs, the first beat at once."""
    return Job(HEARTBEAT, "heartbeat", leases.tick, every(leases.every), first_after=timedelta(0))


def reconcile_job(hook: ReconcileOnClose, pending: PendingReconcile) -> Job:
    """Return the one-off reconciliation of a closed ledger run's window."""
    return Job(
        pending.job_id,
        "ledger_reconcile",
        _ignore_time(partial(hook.fire, pending.job_id)),
        at=pending.run_at,
        fields={"check": pending.check, "ledger_run": pending.ledger_run},
    )
