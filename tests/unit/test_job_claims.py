"""Every recurring job that writes or alarms asks for its scheduled time before it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import driftgauge.api  # noqa: F401  (the app imports the audit it wires; import it first)
from driftgauge.api.audit import _judge_here
from driftgauge.config.loader import load_text
from driftgauge.retention.job import RetentionJob
from driftgauge.signals.service import SignalsService

NOW = datetime(2026, 3, 10, 12, 0, 7, tzinfo=UTC)
CONFIG = """
stores:
  src: {kind: postgres, dsn: "postgresql://u@h/db"}
state: {dsn: "postgresql://u@h/state"}
checks:
  orders:
    source: {store: src, table: orders, key: id, time: created_at}
    reader: {store: src, table: orders_copy, key: id, time: created_at}
    fields: {label: string}
    schedule: {recent: {every: 15m}}
    volume: {trailing: 7}
"""


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


async def test_signals_claim_the_grid_time_of_the_recent_interval() -> None:
    config = load_text(CONFIG)
    claims = Claims()
    svc = SignalsService(config.checks, store=None, source=None,  # type: ignore[arg-type]
                         clock=lambda: NOW, claims=claims)  # type: ignore[arg-type]
    assert await svc.claim("orders")
    assert ("signals:orders", datetime(2026, 3, 10, 12, 0, tzinfo=UTC)) in claims.taken
    other_replica_took(claims, "signals:orders", datetime(2026, 3, 10, 12, 15, tzinfo=UTC))
    svc._clock = lambda: NOW + timedelta(minutes=15)
    assert not await svc.claim("orders")


async def test_ledger_deadlines_are_judged_by_one_replica_per_period() -> None:
    claims = Claims()
    assert await _judge_here(claims, 30.0, NOW)  # type: ignore[arg-type]
    assert not await _judge_here(claims, 30.0, NOW + timedelta(seconds=5))  # type: ignore[arg-type]
    other_replica_took(claims, "ledger-deadlines", datetime(2026, 3, 10, 12, 0, 30, tzinfo=UTC))
    assert not await _judge_here(claims, 30.0, NOW + timedelta(seconds=30))  # type: ignore[arg-type]
    assert await _judge_here(None, 30.0, NOW)


async def test_retention_prunes_on_one_replica_a_day() -> None:
    config = load_text(CONFIG)
    claims = Claims()
    job: Any = RetentionJob(None, config, clock=lambda: NOW, claims=claims)  # type: ignore[arg-type]
    assert await job._claim()
    other_replica_took(claims, "retention", datetime(2026, 3, 11, tzinfo=UTC))
    job._clock = lambda: NOW + timedelta(days=1)
    assert not await job._claim()
