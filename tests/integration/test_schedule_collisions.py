"""Ticks that fall due together on the real state database: none is dropped for being busy."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.jobs.recurring import canary_jobs, tick_jobs
from driftgauge.jobs.runtime import Job, JobRuntime
from driftgauge.jobs.schedule import job_specs
from driftgauge.jobs.schedule_metrics import schedule_part
from driftgauge.jobs.ticks import TickRunner
from driftgauge.metrics.collector import build_registry
from driftgauge.metrics.snapshot import SnapshotCache
from driftgauge.state.store import StateStore
from driftgauge.stores.base import BucketDigest, Granularity
from driftgauge.stores.memory import MemoryAdapter

from .service_helpers import REVIEWS, STORES, Clock, day_rows, filled, schema_name
from .state_helpers import memory_runner, stores_fixture

pytestmark = pytest.mark.integration
# The shipped example's shape: an hourly recent tick, a nightly full pass at 03:00, so
# every night both fall due at the same instant.
CONFIG = (
    STORES
    + """state: {dsn: "<DSN>", schema: <SCHEMA>}
checks:
"""
    + REVIEWS
    + """    settle: 2h
    schedule: {recent: {every: 1h, days: 7}, full: {cron: "0 3 * * *", days: 30}}
"""
)
START = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)


class Gated(MemoryAdapter):
    """A reader whose wide (full-window) day query waits for the test to let it go."""

    def __init__(self, rows: list, gate: asyncio.Event) -> None:  # type: ignore[type-arg]
        super().__init__(rows)
        self.gate = gate

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        if end - start > timedelta(days=10):
            await self.gate.wait()
        return await super().bucket_digests(start, end, granularity)


@pytest.fixture
def config(pg_database: str) -> Config:
    return load_text(filled(CONFIG, pg_database, schema_name()))


stores = stores_fixture(2)


def _sides(reader: MemoryAdapter | None = None) -> dict[tuple[str, str], MemoryAdapter]:
    rows = [r for d in range(40) for r in day_rows(START - timedelta(days=30 - d), 4)]
    return {
        ("src", "reviews"): MemoryAdapter(rows),
        ("dst", "reviews"): reader or MemoryAdapter(rows),
    }


def _runner(config: Config, store: StateStore, clock: Clock, sides: dict) -> TickRunner:  # type: ignore[type-arg]
    return memory_runner(config, store, sides, clock, busy_poll=0.02)


def _replica(config: Config, store: StateStore, clock: Clock, sides: dict) -> JobRuntime:  # type: ignore[type-arg]
    runtime = JobRuntime(clock)
    runtime.add(*tick_jobs(job_specs(config.checks), _runner(config, store, clock, sides).tick))
    return runtime


async def test_eight_nightly_full_passes_run_in_eight_days_on_two_replicas(
    config: Config, stores: list[StateStore]
) -> None:
    clock = Clock(START)
    replicas = [_replica(config, s, clock, _sides()) for s in stores]
    outcomes: list[str] = []
    for hour in range(1, 8 * 24 + 1):
        clock.now = START + timedelta(hours=hour)
        for out in await asyncio.gather(*(r.run_due(clock.now) for r in replicas)):
            outcomes.extend(out.values())
    runs = await stores[0].runs("reviews", limit=1000)
    full = sorted(r.scheduled_for for r in runs if r.trigger == "full" and r.scheduled_for)
    assert full == [START + timedelta(days=d, hours=3) for d in range(8)]
    assert all(r.status == "ok" for r in runs)
    assert "busy" not in outcomes  # a tick waits for the run before it; none is dropped
    recent = [r for r in runs if r.trigger == "recent"]
    # Each 03:00 recent tick either ran or was judged by the full run that began after it.
    assert len(recent) + outcomes.count("subsumed") == 8 * 24
    assert outcomes.count("ran:ok") == 8 * 24 + 8 - outcomes.count("subsumed")


async def _full_pass_under_way(
    config: Config, store: StateStore, *extra: Job
) -> tuple[asyncio.Event, Clock, JobRuntime, asyncio.Task[str]]:
    """Start the 03:00 full pass on a reader that holds its wide query until the gate opens."""
    gate, clock, runtime, _ = _gated(config, store)
    runtime.add(*extra)
    nightly = asyncio.create_task(runtime.fire("reviews:full"))
    await asyncio.sleep(0.2)
    return gate, clock, runtime, nightly


def _gated(
    config: Config, store: StateStore
) -> tuple[asyncio.Event, Clock, JobRuntime, TickRunner]:
    """Return a replica at 03:00 whose full-window reads wait for the gate, and its runner."""
    gate = asyncio.Event()
    sides = _sides()
    sides[("dst", "reviews")] = Gated(sides[("dst", "reviews")].rows, gate)
    clock = Clock(START + timedelta(hours=3))
    runner = _runner(config, store, clock, sides)
    runtime = JobRuntime(clock)
    runtime.add(*tick_jobs(job_specs(config.checks), runner.tick))
    return gate, clock, runtime, runner


async def test_a_full_pass_longer_than_the_recent_period_delays_recent_ticks_not_drops(
    config: Config, stores: list[StateStore]
) -> None:
    gate, clock, runtime, nightly = await _full_pass_under_way(config, stores[0])
    clock.now = START + timedelta(hours=4)  # the full pass still runs an hour later
    waiting = asyncio.create_task(runtime.fire("reviews:recent"))
    await asyncio.sleep(0.2)
    assert not waiting.done()  # it waits for the full pass instead of returning busy
    gate.set()
    async with asyncio.timeout(30):
        assert await nightly == "ran:ok"
        assert await waiting == "ran:ok"
    runs = await stores[0].runs("reviews")
    assert sorted(r.trigger for r in runs) == ["full", "recent"]


async def test_a_recent_tick_waiting_behind_a_full_pass_begun_after_it_is_subsumed(
    config: Config, stores: list[StateStore]
) -> None:
    gate, _, runtime, nightly = await _full_pass_under_way(config, stores[0])
    same_time = asyncio.create_task(runtime.fire("reviews:recent"))
    await asyncio.sleep(0.1)
    gate.set()
    async with asyncio.timeout(30):
        assert await nightly == "ran:ok"
        assert await same_time == "subsumed"  # the full run judged its seven days
    assert [r.trigger for r in await stores[0].runs("reviews")] == ["full"]


async def test_a_full_pass_that_never_begins_shows_as_missed_ticks_in_metrics(
    config: Config, stores: list[StateStore]
) -> None:
    clock = Clock(START)
    runtime = _replica(config, stores[0], clock, _sides())
    for hour in range(1, 3 * 24 + 1):  # three days of recent ticks only: the full job is lost
        clock.now = START + timedelta(hours=hour)
        await runtime.fire("reviews:recent")
    cache = SnapshotCache(stores[0], config.checks, clock)
    await cache.refresh()
    part = schedule_part(cache.current, job_specs(config.checks), clock)
    v = build_registry([part]).get_sample_value
    assert v("driftgauge_schedule_missed_ticks", {"check": "reviews", "trigger": "full"}) == 3
    assert v("driftgauge_schedule_missed_ticks", {"check": "reviews", "trigger": "recent"}) == 0
    await runtime.fire("reviews:full", clock.now)  # the pass runs: nothing is missed any more
    await cache.refresh()
    assert v("driftgauge_schedule_missed_ticks", {"check": "reviews", "trigger": "full"}) == 0
    started = v(
        "driftgauge_schedule_last_started_timestamp_seconds",
        {"check": "reviews", "trigger": "full"},
    )
    assert started == clock.now.timestamp()


LEDGER_WINDOW = (START - timedelta(days=1), START)


async def test_a_ledger_reconcile_behind_a_full_pass_runs_right_after_it(
    config: Config, stores: list[StateStore]
) -> None:
    gate, _, runtime, runner = _gated(config, stores[0])
    nightly = asyncio.create_task(runtime.fire("reviews:full"))
    await asyncio.sleep(0.2)
    ledger = asyncio.create_task(runner.run_after("reviews", *LEDGER_WINDOW))
    await asyncio.sleep(0.2)
    assert not ledger.done()  # it waits for the full pass: never dropped as busy
    gate.set()
    async with asyncio.timeout(30):
        assert (await nightly, await ledger) == ("ran:ok", "ran:ok")
    runs = await stores[0].runs("reviews")
    assert sorted(r.trigger for r in runs) == ["full", "ledger"]
    ledger_run = next(r for r in runs if r.trigger == "ledger")
    full_run = next(r for r in runs if r.trigger == "full")
    assert ledger_run.id > full_run.id  # begun once the full pass was over


async def test_a_ledger_reconcile_waits_for_another_replicas_full_pass(
    config: Config, stores: list[StateStore]
) -> None:
    gate, _, _, nightly = await _full_pass_under_way(config, stores[0])
    other = _runner(config, stores[1], Clock(START + timedelta(hours=3)), _sides())
    ledger = asyncio.create_task(other.run_after("reviews", *LEDGER_WINDOW))
    await asyncio.sleep(0.3)
    assert not ledger.done()  # polling the other replica's lock
    gate.set()
    async with asyncio.timeout(30):
        assert (await nightly, await ledger) == ("ran:ok", "ran:ok")
    runs = await stores[0].runs("reviews")
    assert sorted((r.trigger, r.replica) for r in runs) == [
        ("full", "replica-0"),
        ("ledger", "replica-1"),
    ]


async def test_a_ledger_reconcile_and_a_recent_tick_at_one_instant_both_run(
    config: Config, stores: list[StateStore]
) -> None:
    clock = Clock(START + timedelta(hours=5))
    runner = _runner(config, stores[0], clock, _sides())
    runtime = JobRuntime(clock)
    runtime.add(*tick_jobs(job_specs(config.checks), runner.tick))
    async with asyncio.timeout(30):
        got = await asyncio.gather(
            runtime.fire("reviews:recent"), runner.run_after("reviews", *LEDGER_WINDOW)
        )
    assert list(got) == ["ran:ok", "ran:ok"]
    assert sorted(r.trigger for r in await stores[0].runs("reviews")) == ["ledger", "recent"]


class CanaryCalls:
    """Stands in for the canary service: records each scheduled canary, writes nothing."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def scheduled(self, name: str) -> None:
        self.calls.append(name)


async def test_a_canary_due_with_the_full_pass_runs_beside_it(
    config: Config, stores: list[StateStore]
) -> None:
    raw = CONFIG.replace("<DSN>", "postgresql://unused@127.0.0.1:1/x").replace("<SCHEMA>", "unused")
    raw = raw.replace(
        "    settle: 2h\n", '    settle: 2h\n    canary: {store: dst, cron: "0 3 * * *"}\n'
    ).replace(
        "time: completed_at}\n    fields",
        "time: completed_at,\n"
        "      filter: {bool: {must_not: [{exists: {field: driftgauge_canary}}]}}}\n    fields",
    )
    canaried = load_text(raw)
    assert canaried.checks["reviews"].canary is not None
    canary = CanaryCalls()
    jobs = canary_jobs(canaried.checks, canary)  # type: ignore[arg-type]
    gate, _, runtime, nightly = await _full_pass_under_way(config, stores[0], *jobs)
    async with asyncio.timeout(10):
        # The canary checks the write path, not the check's buckets: it takes no check
        # lock and runs while the full pass holds the check.
        assert await runtime.fire("reviews:canary") == "ran"
    assert canary.calls == ["reviews"] and not nightly.done()
    gate.set()
    async with asyncio.timeout(30):
        assert await nightly == "ran:ok"


class InFlight(MemoryAdapter):
    """A reader that counts the runs reading it at once (all checks share one counter)."""

    now = 0
    most = 0

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        InFlight.now += 1
        InFlight.most = max(InFlight.most, InFlight.now)
        try:
            await asyncio.sleep(0.05)
            return await super().bucket_digests(start, end, granularity)
        finally:
            InFlight.now -= 1


async def test_runs_at_once_are_bounded_and_every_tick_still_runs(
    config: Config, stores: list[StateStore]
) -> None:
    raw = filled(CONFIG, "postgresql://unused@127.0.0.1:1/x", config.state.schema)
    check = raw[raw.index("  reviews:") :]
    many = raw[: raw.index("  reviews:")] + "".join(
        check.replace("reviews", f"c{i}") for i in range(6)
    )
    state_dsn = config.state.dsn.reveal()
    fleet = load_text(many.replace("postgresql://unused@127.0.0.1:1/x", state_dsn, 1))
    rows = [r for d in range(40) for r in day_rows(START - timedelta(days=30 - d), 2)]
    sides: dict[tuple[str, str], MemoryAdapter] = {}
    for i in range(6):
        sides[("src", f"c{i}")] = MemoryAdapter(rows)
        sides[("dst", f"c{i}")] = InFlight(rows)
    for limit, expect in ((2, 2), (6, 6)):
        InFlight.most = 0
        clock = Clock(START + timedelta(hours=5 + limit))
        runner = memory_runner(fleet, stores[0], sides, clock, max_runs=limit)
        runtime = JobRuntime(clock)
        runtime.add(*tick_jobs(job_specs(fleet.checks), runner.tick))
        async with asyncio.timeout(60):
            got = await asyncio.gather(*(runtime.fire(f"c{i}:recent") for i in range(6)))
        assert list(got) == ["ran:ok"] * 6  # they waited their turn; none was dropped
        assert InFlight.most == expect
