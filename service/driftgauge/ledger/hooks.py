"""Reconcile a sync-job run's window once the run closes and its writes have settled."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from driftgauge.background import survive
from driftgauge.config.frozen import Check
from driftgauge.core.clock import utc_now
from driftgauge.core.errors import DriftgaugeError
from driftgauge.engine import plan
from driftgauge.ledger.models import RunOut

log = logging.getLogger("driftgauge.ledger")
ReconcileFn = Callable[[str, datetime, datetime], Awaitable[object]]
"""Reconcile one check over [start, end) (the app passes TickRunner.run_after: it waits
for a run of the check already under way, never dropping the reconcile as busy)."""


@dataclass(frozen=True)
class PendingReconcile:
    """A one-off reconciliation waiting for its run's writes to settle."""

    job_id: str
    check: str
    window_start: datetime
    window_end: datetime
    run_at: datetime
    ledger_run: int


@dataclass(eq=False)
class ReconcileOnClose:
    """The run-closed hook: schedule a one-off reconciliation of each fed check's window.

    In production the job runtime fires them (`fire(job_id)`); tests drive `run_due(now)`.
    Several runs closing for the same window coalesce into one job.
    """

    checks: Mapping[str, Check]
    reconcile: ReconcileFn
    _: KW_ONLY
    clock: Callable[[], datetime] = utc_now
    _pending: dict[str, PendingReconcile] = field(default_factory=dict, init=False)
    on_pending: Callable[[PendingReconcile], None] | None = field(default=None, init=False)
    """Set by the job runtime: it then runs each reconciliation at its time (`fire`)."""

    @property
    def pending(self) -> list[PendingReconcile]:
        """Return the reconciliations not yet run, earliest first."""
        return sorted(self._pending.values(), key=lambda p: (p.run_at, p.job_id))

    async def __call__(self, run: RunOut) -> None:
        """Schedule a reconciliation of the run's window for every check its job feeds."""
        now = self.clock()
        for name, check in sorted(self.checks.items()):
            if check.ledger is None or check.ledger.job != run.job:
                continue
            starts = plan.day_starts(run.window_start, run.window_end, check.timezone)
            start = starts[0]
            end = plan.next_day(starts[-1], check.timezone)
            job_id = f"ledger-reconcile:{name}:{start.date()}:{end.date()}"
            pending = PendingReconcile(job_id, name, start, end, now + check.ledger.settle, run.id)
            self._pending[job_id] = pending
            self._add(pending)
            log.info(
                "reconcile scheduled",
                extra={"check": name, "ledger_run": run.id, "run_at": pending.run_at.isoformat()},
            )

    def _add(self, p: PendingReconcile) -> None:
        if self.on_pending is not None:
            self.on_pending(p)

    async def run_due(self, now: datetime) -> list[str]:
        """Run every pending reconciliation due at `now`; return their job ids."""
        due = [p.job_id for p in self.pending if p.run_at <= now]
        for job_id in due:
            await self.fire(job_id)
        return due

    async def fire(self, job_id: str) -> None:
        """Run one pending reconciliation now (a no-op if it already ran)."""
        p = self._pending.pop(job_id, None)
        if p is None:
            return
        with survive("ledger_reconcile", p.job_id, check=p.check, ledger_run=p.ledger_run):
            try:
                await self.reconcile(p.check, p.window_start, p.window_end)
            except DriftgaugeError as exc:
                log.warning(
                    "reconcile after a ledger run failed",
                    extra={"check": p.check, "ledger_run": p.ledger_run, "error": str(exc)},
                )
