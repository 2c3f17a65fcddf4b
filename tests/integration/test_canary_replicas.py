"""Two replicas' canaries on the real OpenSearch and state database: each time claimed once.

Both replicas fire every scheduled time at the same instant and share one sentinel id; the
claim (and the job lock) must let exactly one of them write it, so no attempt reads back
the other's token as `not_visible` or meets a version conflict.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from opensearchpy import AsyncOpenSearch

from driftgauge.canary.service import CanaryService
from driftgauge.canary.store import CanaryStore
from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.jobs.recurring import canary_jobs
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.stores import open_adapter
from tests.integration.conftest import unique_name
from tests.integration.service_helpers import Clock
from tests.integration.signals_support import (
    NOT_CANARY,
    SYNC_STORE,
    create_canary_index,
    insert_tasks,
    reviews_raw,
)
from tests.integration.state_helpers import replica_stores

pytestmark = pytest.mark.integration

T0 = datetime(2024, 5, 7, 12, 0, tzinfo=UTC)
TIMES = 8


def config_text(dsn: str, index: str, schema: str) -> str:
    raw = reviews_raw(
        dsn,
        index,
        db="db",
        stores={"sync": SYNC_STORE},
        state={"dsn": dsn, "schema": schema},
        reader={"filter": NOT_CANARY},
        canary={"store": "sync", "document": {"label": "ok"}, "every": "1m", "timeout_seconds": 20},
    )
    return yaml.safe_dump(raw)


@pytest.fixture
async def replicas(
    pg_database: str, os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> AsyncIterator[list[Any]]:
    await insert_tasks(
        pg_database, "ok", [(f"task-{i}", T0 - timedelta(hours=20 - i)) for i in range(5)]
    )
    index = os_index("dg_canary_pair")
    await create_canary_index(os_client, index, "label")
    config = load_text(config_text(pg_database, index, unique_name("dg_state")))
    check = config.checks["reviews"]
    clock = Clock(T0)  # the replicas' shared clock, moved by the test to each scheduled time
    opened: list[Any] = []

    async def source(c: Check) -> Any:
        adapter = await open_adapter(c.source)
        opened.append(adapter)
        return adapter

    async with replica_stores(config.state, 2) as stores:
        services = [
            CanaryService(config.checks, CanaryStore(s.calls.pool), source, clock=clock)
            for s in stores
        ]
        # One job runtime per replica, each claiming through its own state store.
        runtimes = [JobRuntime(clock, claims=s.claims) for s in stores]
        for rt, service in zip(runtimes, services, strict=True):
            rt.add(*canary_jobs(config.checks, service))
        try:
            yield [services, stores, clock, check, runtimes]
        finally:
            for a in opened:
                await a.close()


async def test_every_scheduled_canary_is_claimed_once_with_no_false_alarm(
    replicas: list[Any],
) -> None:
    services, stores, clock, _, runtimes = replicas
    for i in range(TIMES):
        # Both replicas fire the same scheduled time, a few milliseconds apart.
        clock.now = T0 + timedelta(minutes=i, milliseconds=5)
        await asyncio.gather(*(rt.fire("reviews:canary") for rt in runtimes))
    results = await services[0].store.history("reviews", limit=100)
    assert [r.result for r in results] == ["ok"] * TIMES, [(r.result, r.detail) for r in results]
    owners = [
        await stores[0].claims.claimed_by("canary:reviews", T0 + timedelta(minutes=i))
        for i in range(TIMES)
    ]
    assert all(o in ("replica-0", "replica-1") for o in owners), owners


async def test_a_time_is_not_claimed_while_the_previous_attempt_still_runs(
    replicas: list[Any],
) -> None:
    services, stores, clock, _, runtimes = replicas
    clock.now = T0 + timedelta(minutes=30, milliseconds=5)
    async with stores[1].claims.lock("canary:reviews") as got:
        assert got
        await runtimes[0].fire("reviews:canary")
    assert await stores[0].claims.claimed_by("canary:reviews", T0 + timedelta(minutes=30)) is None
    assert await services[0].store.history("reviews") == []
