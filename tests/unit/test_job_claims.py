"""Every recurring job that writes or alarms asks for its scheduled time before it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from driftgauge.configfile.loader import load_text
from driftgauge.jobs.recurring import audit_job, retention_job, signals_jobs
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.retention.job import RetentionJob
from driftgauge.signals.service import SignalsService

from .config_text import config_head

NOW = datetime(2026, 3, 10, 12, 0, 7, tzinfo=UTC)
CONFIG = (
    config_head(src="postgres")
    + """
  orders:
    source: {store: src, table: orders, key: id, time: created_at}
    reader: {store: src, table: orders_copy, key: id, time: created_at}
    fields: {label: string}
    schedule: {recent: {every: 15m}}
    volume: {trailing: 7}
"""
)


class Claims:
    """Our own in-memory stand-in for JobClaims: the first asker of a time gets it, once."""

    def __init__(self) -> None:
        self.taken: dict[tuple[str, datetime], str] = {}
        self.replica = "me"

    async def claim(self, job: str, scheduled_for: datetime) -> bool:
        if (job, scheduled_for) in self.taken:
            return False
        self.taken[(job, scheduled_for)] = self.replica
        return True

    @asynccontextmanager
    async def lock(self, job: str) -> AsyncIterator[bool]:
        yield True


def other_replica_took(claims: Claims, job: str, at: datetime) -> None:
    claims.taken[(job, at)] = "other"


def runtime(claims: Claims | None) -> JobRuntime:
    """Return a job runtime claiming through `claims`."""
    return JobRuntime(lambda: NOW, claims=claims)  # type: ignore[arg-type]


async def nothing() -> None:
    """Stand in for a job's work: only the claim is under test."""


async def test_signals_claim_the_grid_time_of_the_recent_interval() -> None:
    config = load_text(CONFIG)
    claims = Claims()
    svc = SignalsService(
        config.checks,
        store=None,  # type: ignore[arg-type]
        source=None,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    jobs = runtime(claims)
    jobs.add(*signals_jobs(config.checks, svc))
    assert await jobs.claim("orders:signals")
    assert ("signals:orders", datetime(2026, 3, 10, 12, 0, tzinfo=UTC)) in claims.taken
    other_replica_took(claims, "signals:orders", datetime(2026, 3, 10, 12, 15, tzinfo=UTC))
    assert not await jobs.claim("orders:signals", NOW + timedelta(minutes=15))


async def test_ledger_deadlines_are_judged_by_one_replica_per_period() -> None:
    claims = Claims()
    jobs, alone = runtime(claims), runtime(None)
    for rt in (jobs, alone):
        rt.add(audit_job(nothing, nothing, 30.0))
    assert await jobs.claim("audit", NOW)
    assert not await jobs.claim("audit", NOW + timedelta(seconds=5))
    other_replica_took(claims, "ledger-deadlines", datetime(2026, 3, 10, 12, 0, 30, tzinfo=UTC))
    assert not await jobs.claim("audit", NOW + timedelta(seconds=30))
    assert await alone.claim("audit", NOW)


async def test_retention_prunes_on_one_replica_a_day() -> None:
    config = load_text(CONFIG)
    claims = Claims()
    job = RetentionJob(None, config, clock=lambda: NOW)  # type: ignore[arg-type]
    jobs = runtime(claims)
    jobs.add(retention_job(job))
    assert await jobs.claim("retention")
    other_replica_took(claims, "retention", datetime(2026, 3, 11, tzinfo=UTC))
    assert not await jobs.claim("retention", NOW + timedelta(days=1))
