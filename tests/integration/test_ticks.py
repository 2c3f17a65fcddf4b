"""Scheduled ticks on the real state database: replicas, deadlines, cancellation, failures."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from driftgauge.config.frozen import Config
from driftgauge.core.errors import StoreUnavailable
from driftgauge.jobs.adapters import AdapterPool
from driftgauge.jobs.recurring import tick_jobs
from driftgauge.jobs.runner import run_check
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.jobs.schedule import TickFn, job_specs
from driftgauge.jobs.ticks import TickRunner
from driftgauge.metrics.collector import build_registry, reconciliation_part
from driftgauge.metrics.snapshot import SnapshotCache
from driftgauge.state.samples import KeyFilter
from driftgauge.state.store import StateStore
from driftgauge.stores.base import BucketDigest, Granularity
from driftgauge.stores.memory import MemoryAdapter

from .service_helpers import (
    DAY0,
    NOW,
    Clock,
    day_rows,
    hashed,
    make_config,
    memory_opener,
    planted,
    schema_name,
)
from .state_helpers import memory_runner, stores_fixture

pytestmark = pytest.mark.integration
T0 = NOW.replace(minute=0) + timedelta(minutes=1)


class Stuck(MemoryAdapter):
    """An adapter whose day query never answers, like a hung store."""

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        await asyncio.Event().wait()
        return []


def sides(
    reviews_reader: MemoryAdapter | None = None,
) -> tuple[dict[tuple[str, str], MemoryAdapter], dict[str, set[str]]]:
    rows = [r for d in range(3) for r in day_rows(DAY0 + timedelta(days=d), 60)]
    reader, truth = planted(rows)
    orders = [
        hashed(str(1000 + i), "12.50", DAY0 + timedelta(hours=i), "integer") for i in range(30)
    ]
    return {
        ("src", "reviews"): MemoryAdapter(rows),
        ("dst", "reviews"): reviews_reader or MemoryAdapter(reader),
        ("src", "orders"): MemoryAdapter(orders),
        ("dst", "orders"): MemoryAdapter(list(orders)),
    }, truth


@pytest.fixture
async def config(pg_database: str) -> Config:
    return make_config(pg_database, schema_name())


def scheduler(config: Config, tick: TickFn, clock: Clock) -> JobRuntime:
    """Return a job runtime firing every check's ticks."""
    runtime = JobRuntime(clock)
    runtime.add(*tick_jobs(job_specs(config.checks), tick))
    return runtime


stores = stores_fixture(2)


async def test_two_replicas_run_each_scheduled_tick_exactly_once(
    config: Config, stores: list[StateStore]
) -> None:
    adapters, truth = sides()
    clock = Clock(T0)
    replicas = []
    for store in stores:
        runner = TickRunner(
            config.checks, store, AdapterPool(config.checks, memory_opener(adapters)), clock=clock
        )
        replicas.append(scheduler(config, runner.tick, clock))
    outcomes: list[str] = []
    for hours in (1, 2, 3):
        clock.now = T0 + timedelta(hours=hours)
        for out in await asyncio.gather(*(r.run_due(clock.now) for r in replicas)):
            outcomes.extend(out.values())
    runs = await stores[0].runs("reviews")
    recent = sorted((r.scheduled_for, r.replica) for r in runs if r.trigger == "recent")
    assert [t for t, _ in recent] == [NOW.replace(minute=0) + timedelta(hours=h) for h in (1, 2, 3)]
    assert len(await stores[0].runs("orders")) == 3
    assert outcomes.count("ran:drift") == 3 and outcomes.count("ran:ok") == 3
    assert len(outcomes) == 12  # the other replica skipped each tick as taken or busy

    days = await stores[1].day_buckets("reviews", DAY0.date(), (DAY0 + timedelta(1)).date())
    assert [(d.bucket.missing, d.bucket.extra, d.bucket.mismatched) for d in days] == [
        (2, 1, 1),
        (2, 1, 1),
    ]
    total, keys = await stores[1].keys(days[0].run_id, DAY0.date())
    assert total == 4
    assert {k.diff.key for k in keys} <= set().union(*truth.values())
    prefix = keys[0].key_hash[:2] if keys[0].key_hash else "zz"
    _, under = await stores[1].keys(days[0].run_id, DAY0.date(), KeyFilter(prefix=prefix))
    assert keys[0].diff.key in {k.diff.key for k in under}


async def test_a_hung_store_misses_its_deadline_without_holding_up_other_checks(
    config: Config, stores: list[StateStore]
) -> None:
    adapters, _ = sides(reviews_reader=Stuck([]))
    runner = memory_runner(config, stores[0], adapters, Clock(T0), deadline=0.5)
    sched = scheduler(config, runner.tick, Clock(T0))
    async with asyncio.timeout(30):
        out = await sched.run_due(T0 + timedelta(hours=1))
    assert out == {"reviews:recent": "ran:error", "orders:recent": "ran:ok"}
    failed = (await stores[0].runs("reviews"))[0]
    assert failed.status == "error" and not failed.complete
    assert failed.error is not None and "deadline" in failed.error


async def test_shutdown_cancels_a_running_check_and_it_never_looks_complete(
    config: Config, stores: list[StateStore]
) -> None:
    adapters, _ = sides(reviews_reader=Stuck([]))
    runner = memory_runner(config, stores[0], adapters, Clock(T0))
    run_id = await runner.trigger("reviews")
    assert runner.busy("reviews")
    running = await stores[0].run("reviews", run_id)
    assert running is not None and running.status == "running"
    await runner.shutdown()
    run = await stores[0].run("reviews", run_id)
    assert run is not None and run.status == "error" and not run.complete
    assert run.error is not None and run.error.startswith("interrupted: ")
    assert await stores[0].leases.interrupted("reviews") == 1
    assert await stores[0].latest_completed_run("reviews") is None


async def test_a_failed_run_keeps_the_last_good_rows_in_metrics(
    config: Config, stores: list[StateStore]
) -> None:
    adapters, _ = sides()
    state = stores[0]
    pool = AdapterPool(config.checks, memory_opener(adapters))
    check = config.checks["reviews"]
    good = await run_check(
        check, pool.getter("reviews"), state, DAY0, NOW, trigger="recent", now=NOW
    )
    assert good.status == "drift"
    adapters[("dst", "reviews")].fail_with = StoreUnavailable("dst", "connection refused")
    bad = await run_check(
        check,
        pool.getter("reviews"),
        state,
        DAY0,
        NOW,
        trigger="recent",
        now=NOW + timedelta(hours=1),
    )
    assert bad.error is not None and "connection refused" in bad.error

    cache = SnapshotCache(state, config.checks, Clock(NOW + timedelta(hours=1)))
    await cache.refresh()
    v = build_registry([reconciliation_part(cache.current)]).get_sample_value
    assert v("driftgauge_check_up", {"check": "reviews"}) == 0
    assert (
        v(
            "driftgauge_bucket_rows",
            {"check": "reviews", "day": DAY0.date().isoformat(), "kind": "missing"},
        )
        == 2
    )
    assert v("driftgauge_rows", {"check": "reviews", "kind": "extra"}) == 2
    assert v("driftgauge_check_runs_total", {"check": "reviews", "status": "error"}) == 1


async def test_slots_come_with_the_first_pass_while_the_last_verdict_is_drift(
    config: Config, stores: list[StateStore]
) -> None:
    adapters, _ = sides()
    check = config.checks["reviews"]
    src, dst = adapters[("src", "reviews")], adapters[("dst", "reviews")]
    start, end = DAY0, DAY0 + timedelta(days=3)
    pool = AdapterPool(config.checks, memory_opener(adapters))

    async def run(slots_first: bool | None = None) -> tuple[str, str]:
        src.calls.clear()
        result = await run_check(
            check,
            pool.getter("reviews"),
            stores[0],
            start,
            end,
            trigger="cli",
            now=NOW,
            slots_first=slots_first,
        )
        assert result.error is None
        return result.status, src.calls[0]

    assert await run() == ("drift", "days+slots:60")  # no day judged yet
    assert await run() == ("drift", "days+slots:60")  # the last verdict was drift
    assert await run(slots_first=False) == ("drift", "buckets:day")
    dst.rows = list(src.rows)  # the reader is repaired
    assert await run() == ("ok", "days+slots:60")  # still drift on record
    assert await run() == ("ok", "buckets:day")  # healthy again: days only
    end += timedelta(days=1)  # a day never judged joins
    assert await run() == ("ok", "buckets:day")  # the judged ones were healthy
