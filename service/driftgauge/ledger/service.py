"""The run ledger's behaviour: accept runs, batches and summaries; judge job windows."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, InitVar, dataclass, field, replace
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from driftgauge.background import survive
from driftgauge.config.frozen import Check, Ledger
from driftgauge.core.clock import utc_now
from driftgauge.core.errors import DriftgaugeError
from driftgauge.ledger import rules
from driftgauge.ledger.errors import LedgerInputError
from driftgauge.ledger.models import (
    Acknowledge,
    Batch,
    BatchOut,
    BreachOut,
    Rule,
    RunOpen,
    RunOut,
    Summary,
)
from driftgauge.ledger.store import LedgerStore

log = logging.getLogger("driftgauge.ledger")
RunClosed = Callable[[RunOut], Awaitable[None]]
"""Called once per run when its summary first arrives (e.g. to reconcile its window)."""


@dataclass(frozen=True)
class JobSettings:
    """How one sync job's windows are judged, and which checks it feeds."""

    ledger: Ledger
    timezone: ZoneInfo
    checks: tuple[str, ...]

    @property
    def job(self) -> str:
        """Return the sync job's name, as its ledger settings give it."""
        return self.ledger.job


def job_settings(checks: Mapping[str, Check]) -> dict[str, JobSettings]:
    """Return the configured sync jobs (checks that share a job agree on its settings)."""
    out: dict[str, JobSettings] = {}
    for name, check in sorted(checks.items()):
        if check.ledger is None:
            continue
        seen = out.get(check.ledger.job)
        fed = (*seen.checks, name) if seen is not None else (name,)
        out[check.ledger.job] = JobSettings(check.ledger, check.timezone, fed)
    return out


@dataclass(eq=False)
class LedgerService:
    """Record what sync-job runs report and keep each job window's breaches up to date."""

    store: LedgerStore
    checks: InitVar[Mapping[str, Check]]
    _: KW_ONLY
    clock: Callable[[], datetime] = utc_now
    on_close: RunClosed | None = None
    jobs: dict[str, JobSettings] = field(init=False)
    _watched: dict[str, datetime] = field(default_factory=dict, init=False)

    def __post_init__(self, checks: Mapping[str, Check]) -> None:
        self.jobs = job_settings(checks)

    def _job(self, name: str) -> JobSettings:
        job = self.jobs.get(name)
        if job is None:
            known = ", ".join(sorted(self.jobs)) or "none"
            raise LedgerInputError("job", f"unknown job {name!r} (configured: {known})")
        return job

    async def open_run(self, req: RunOpen) -> tuple[RunOut, bool]:
        """Open a run (or return the one with the same client run id); True when new."""
        job = self._job(req.job)
        await self._watched_since(job.job, self.clock())
        return await self.store.open_run(
            req, rules.window_day(req.window_start, job.timezone), self.clock()
        )

    async def add_batch(self, run_id: int, batch: Batch) -> BatchOut:
        """Record a batch of outcomes once, however often it is sent."""
        duplicate, run = await self.store.add_batch(run_id, batch, self.clock())
        return BatchOut(
            run_id=run_id, batch_id=batch.batch_id, duplicate=duplicate, outcomes=run.outcomes
        )

    async def close_run(self, run_id: int, summary: Summary) -> RunOut:
        """Store the job's summary, judge the run's window and fire the run-closed hook."""
        run, changed = await self.store.close_run(run_id, summary, self.clock())
        if not changed:
            return run
        job = self.jobs.get(run.job)
        if job is not None:
            # The summary is stored: a window that cannot be judged is counted, not a 500.
            with survive(
                "ledger_deadlines",
                "judge a closed run's window",
                job=run.job,
                window_day=str(run.window_day),
            ):
                await self.evaluate_window(job, run.window_day, self.clock())
        if self.on_close is not None:
            with survive("ledger_reconcile", "schedule a closed run's reconcile", run_id=run.id):
                try:
                    await self.on_close(run)
                except DriftgaugeError as exc:
                    # The summary is recorded; a failed follow-up must not make the job retry.
                    log.warning(
                        "run-closed hook failed", extra={"run_id": run.id, "error": str(exc)}
                    )
        return run

    async def acknowledge(self, job: str, day: date, rule: Rule, ack: Acknowledge) -> BreachOut:
        """Record who acknowledged a breach and why; it stops counting as open."""
        out = await self.store.acknowledge(job, day, rule, ack, self.clock())
        log.warning(
            "ledger breach acknowledged",
            extra={"job": job, "window_day": day.isoformat(), "rule": rule, "by": ack.by},
        )
        return out

    async def _watched_since(self, job: str, now: datetime) -> datetime:
        """Return when the ledger began watching the job (recorded once, shared by replicas)."""
        since = self._watched.get(job)
        if since is None:
            since = self._watched[job] = await self.store.watched_since(job, now)
        return since

    async def evaluate_window(self, job: JobSettings, day: date, now: datetime) -> dict[Rule, str]:
        """Judge one window of a job against every rule and record the result.

        A window is judged once it is past its summary deadline or has a closed run. One
        that ended before the ledger began watching the job, with no run, breaches nothing:
        the job may have reported it before there was a ledger to report to.
        """
        end = rules.window_bounds(day, job.timezone)[1]
        due = now >= end + job.ledger.summary_deadline
        facts = await self.store.window_facts(job.job, day, due)
        if not facts.runs:
            watched = end > await self._watched_since(job.job, now)
            facts = replace(facts, watched=watched)
        if not due and not any(r.closed for r in facts.runs):
            # A window still in progress is not judged yet: recording it would make it the
            # job's latest window and hide the verdict of the one before.
            return {}
        found = rules.evaluate(facts, job.ledger.no_match_rate)
        new = await self.store.record_evaluation(job.job, day, due, found, now)
        for rule in new:
            log.warning(
                "ledger breach",
                extra={
                    "job": job.job,
                    "window_day": day.isoformat(),
                    "rule": rule,
                    "detail": found[rule],
                },
            )
        return found

    async def evaluate_all(
        self, now: datetime | None = None, lookback: timedelta = timedelta(days=7)
    ) -> dict[str, date]:
        """Judge every job's latest window and its recent windows with runs; return the latest.

        The latest window is the newest one that is past its summary deadline or already
        has a closed run, so a job that stops reporting breaches missing_summary.
        """
        now = now or self.clock()
        latest: dict[str, date] = {}
        for job in self.jobs.values():
            with survive("ledger_deadlines", "find a job's windows", job=job.job):
                # Recorded at the first judgement, so a job that never reports breaches
                # from its first window that ends while the ledger watches.
                await self._watched_since(job.job, now)
                due_day = rules.latest_due_day(now, job.timezone, job.ledger.summary_deadline)
                closed = await self.store.latest_closed_day(job.job)
                last = max(due_day, closed) if closed is not None else due_day
                # From the earlier of the two: a wild closed day must not hide the recent ones.
                days = set(await self.store.days_with_runs(job.job, min(last, due_day) - lookback))
                # Windows that still breach are judged again, however old, so a late summary
                # or a backfill resolves them; until then they stay on /metrics.
                days |= set(await self.store.open_breach_days(job.job))
                for day in sorted(days | {last, due_day}):
                    # One malformed window (bad data in the state database) is counted and
                    # skipped: the job's other windows are still judged.
                    with survive(
                        "ledger_deadlines", "judge a window", job=job.job, window_day=str(day)
                    ):
                        await self.evaluate_window(job, day, now)
                latest[job.job] = last
        return latest


async def ledger_exclusions(
    state: LedgerStore, check: Check, window_start: datetime, window_end: datetime
) -> dict[str, str]:
    """Return the `ledger_excluded` mapping the engine takes for [window_start, window_end).

    Keys come from runs of the check's sync job whose window overlaps the check's; a key
    counts when its latest report is no_match or skipped (with the job's reason).
    """
    if check.ledger is None:
        return {}
    return await state.excused_keys(check.ledger.job, window_start, window_end)


ExcusedKeys = Callable[[Check, datetime, datetime], Awaitable[dict[str, str]]]
"""What a run asks for a check's `ledger_excluded` keys over its window."""


def exclusion_source(store: LedgerStore | None) -> ExcusedKeys:
    """Return the ledger exclusions every run takes (none without a ledger store).

    The service passes its audit's store; the CLI one it opens when the check has a ledger.
    """

    async def excused(check: Check, window_start: datetime, window_end: datetime) -> dict[str, str]:
        if store is None:
            return {}
        return await ledger_exclusions(store, check, window_start, window_end)

    return excused
