"""A config change rolled out replica by replica: no scheduled tick runs twice or not at all.

Two replicas share one real state database. Replica 0 restarts first with a config that runs
`orders` every 30 minutes instead of every hour, while replica 1 still runs the old config;
then replica 1 is down for one tick and comes back with the new config. Through the whole
rollout each scheduled time of each check must have exactly one run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

import pytest

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.jobs.recurring import tick_jobs
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.jobs.schedule import job_specs
from driftgauge.state.store import StateStore
from driftgauge.stores.memory import MemoryAdapter

from .service_helpers import CONFIG, DAY0, NOW, Clock, day_rows, filled, hashed, schema_name
from .state_helpers import memory_runner

pytestmark = pytest.mark.integration
HOUR = NOW.replace(minute=0)
OLD_ORDERS = "schedule: {recent: {every: 1h, days: 3}}\n"
NEW_ORDERS = "schedule: {recent: {every: 30m, days: 3}}\n"


def config_text(dsn: str, schema: str, orders_schedule: str) -> Config:
    """Return the two-check config with `orders` on the given schedule line."""
    text = filled(CONFIG, dsn, schema, public="true")
    assert text.endswith(OLD_ORDERS)
    return load_text(text[: -len(OLD_ORDERS)] + orders_schedule)


def adapters() -> dict[tuple[str, str], MemoryAdapter]:
    """Return equal sides for both checks: every run is ok."""
    rows = [r for d in range(3) for r in day_rows(DAY0 + timedelta(days=d), 30)]
    orders = [hashed(str(i), "1.00", DAY0 + timedelta(hours=i), "integer") for i in range(30)]
    return {
        ("src", "reviews"): MemoryAdapter(rows),
        ("dst", "reviews"): MemoryAdapter(list(rows)),
        ("src", "orders"): MemoryAdapter(orders),
        ("dst", "orders"): MemoryAdapter(list(orders)),
    }


@dataclass
class Replica:
    """One running replica: its state store and its job runtime."""

    state: StateStore
    runtime: JobRuntime


async def start(config: Config, name: str, clock: Clock) -> Replica:
    """Start a replica of `config` named `name`, as a new process would."""
    state = await StateStore.open(config.state, replica=name)
    runner = memory_runner(config, state, adapters(), clock)
    runtime = JobRuntime(clock)
    runtime.add(*tick_jobs(job_specs(config.checks), runner.tick))
    return Replica(state, runtime)


async def test_a_rolling_config_change_runs_every_tick_exactly_once(pg_database: str) -> None:
    schema = schema_name()
    old = config_text(pg_database, schema, OLD_ORDERS)
    new = config_text(pg_database, schema, NEW_ORDERS)
    clock = Clock(HOUR)
    replicas = [await start(old, "r0", clock), await start(old, "r1", clock)]
    # (offset from HOUR, what happens to the replicas just before that tick)
    steps: list[tuple[timedelta, str]] = [
        (timedelta(hours=1), "both old"),
        (timedelta(hours=1, minutes=30), "r0 restarted with the new config"),
        (timedelta(hours=2), "r0 new, r1 old"),
        (timedelta(hours=2, minutes=30), "r1 down"),
        (timedelta(hours=3), "r1 back with the new config"),
        (timedelta(hours=3, minutes=30), "both new"),
        (timedelta(hours=4), "both new"),
    ]
    gone: list[StateStore] = []
    outcomes: list[str] = []
    try:
        for offset, what in steps:
            if what.startswith("r0 restarted"):
                gone.append(replicas[0].state)
                replicas[0] = await start(new, "r0-2", clock)
            live = replicas
            if what == "r1 down":
                gone.append(replicas[1].state)
                live = [replicas[0]]
            if what.startswith("r1 back"):
                replicas[1] = await start(new, "r1-2", clock)
                live = replicas
            clock.now = HOUR + offset
            for r in live:
                outcomes.extend((await r.runtime.run_due(clock.now)).values())
        reader = replicas[0].state
        runs = [r for c in ("reviews", "orders") for r in await reader.runs(c)]
    finally:
        for s in {id(s): s for s in [*gone, *(r.state for r in replicas)]}.values():
            await s.close()
    ran = {
        check: Counter(r.scheduled_for for r in runs if (r.check, r.trigger) == (check, "recent"))
        for check in ("reviews", "orders")
    }
    hourly = [HOUR + timedelta(hours=h) for h in (1, 2, 3, 4)]
    assert ran["reviews"] == Counter(hourly)
    # Old config: 1:00. From 1:30 on the new one is live on a replica: every half hour.
    half_hourly = [HOUR + timedelta(minutes=m) for m in range(60, 241, 30)]
    assert ran["orders"] == Counter(half_hourly)
    # The full pass too: each of its scheduled times at most once, whichever replica ran it.
    assert max(Counter((r.check, r.trigger, r.scheduled_for) for r in runs).values()) == 1
    assert {r.status for r in runs} == {"ok"}
    # The replicas did meet: ticks the other replica had run were refused as taken.
    assert outcomes.count("taken") >= len(steps)
