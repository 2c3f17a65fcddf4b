"""Scheduler timing on a controllable clock: aligned ticks, coalescing, independent checks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from driftgauge.configfile.loader import load_text
from driftgauge.engine.plan import next_day
from driftgauge.jobs.recurring import signals_grid, tick_jobs
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.jobs.schedule import JobSpec, TickFn, collisions, job_specs

from .config_text import config_head

CONFIG = (
    config_head(src="postgres", dst="opensearch")
    + """
  reviews:
    source: {store: src, table: t, key: k, time: ts}
    reader: {store: dst, index: i, key: k, time: ts}
    timezone: Europe/Berlin
    schedule: {recent: {every: 1h, days: 3}, full: {cron: "0 3 * * *", days: 90}}
  orders:
    source: {store: src, table: o, key: k, time: ts}
    reader: {store: dst, index: o, key: k, time: ts}
    schedule: {recent: {every: 15m}, full: {every: 1d}}
"""
)
T0 = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def specs() -> list[JobSpec]:
    return job_specs(load_text(CONFIG).checks)


def scheduler(tick: TickFn, clock: Clock | None = None) -> JobRuntime:
    """Return a job runtime firing every check's ticks."""
    runtime = JobRuntime(clock)
    runtime.add(*tick_jobs(specs(), tick))
    return runtime


def test_jobs_per_check_come_from_its_schedule() -> None:
    got = {(s.id, s.every, s.cron) for s in specs()}
    assert got == {
        ("orders:recent", timedelta(minutes=15), None),
        ("orders:full", timedelta(days=1), None),
        ("reviews:recent", timedelta(hours=1), None),
        ("reviews:full", None, "0 3 * * *"),
    }


def test_interval_ticks_sit_on_a_grid_every_replica_shares() -> None:
    hourly = JobSpec("c", "recent", every=timedelta(hours=1))
    assert hourly.latest_fire(T0 + timedelta(minutes=37, seconds=5)) == T0
    assert hourly.latest_fire(T0) == T0
    every2s = JobSpec("c", "recent", every=timedelta(seconds=2))
    assert every2s.latest_fire(T0 + timedelta(seconds=5.5)) == T0 + timedelta(seconds=4)


DAILY = (
    config_head(src="postgres", dst="opensearch")
    + """
  c:
    source: {store: src, table: t, key: k, time: ts}
    reader: {store: dst, index: i, key: k, time: ts}
    timezone: <TZ>
    settle: <SETTLE>
    schedule: {recent: {every: <EVERY>}, full: {every: 7d}}
"""
)


@pytest.mark.parametrize(
    ("tz", "settle", "every", "late"),
    [
        ("UTC", "2h", "1d", timedelta(0)),
        ("UTC", "1m", "6h", timedelta(0)),
        ("UTC", "0s", "1d", timedelta(0)),
        # Summer time moves local midnight an hour earlier: the run is then an hour late.
        ("Europe/Berlin", "2h", "1d", timedelta(hours=1)),
        ("America/New_York", "30m", "12h", timedelta(hours=1)),
        ("Australia/Sydney", "3h", "1d", timedelta(hours=1)),
        ("Asia/Kolkata", "90m", "1d", timedelta(0)),
    ],
)
def test_a_reconcile_grid_fires_once_each_day_has_settled(
    tz: str, settle: str, every: str, late: timedelta
) -> None:
    # A day bucket is judged once its end plus settle has passed. A grid anchored at 00:00
    # fired a daily run just before that, so yesterday waited a whole day to be judged.
    text = DAILY.replace("<TZ>", tz).replace("<SETTLE>", settle).replace("<EVERY>", every)
    check = load_text(text).checks["c"]
    (recent, _full) = sorted(job_specs({"c": check}), key=lambda s: s.kind, reverse=True)
    assert recent.kind == "recent"
    # The volume measurement counts settled days only: the same holds for its grid.
    for grid in (recent, signals_grid(check)):
        day = datetime(2026, 1, 1, tzinfo=ZoneInfo(tz))
        for _ in range(366):
            day = next_day(day, check.timezone)
            settled = day + check.settle
            fire = grid.next_fire(settled - timedelta(microseconds=1))
            assert fire is not None and settled <= fire <= settled + late, (grid, day, fire)


def test_cron_ticks_follow_the_checks_time_zone() -> None:
    nightly = JobSpec("c", "full", cron="0 3 * * *", timezone=ZoneInfo("Europe/Berlin"))
    # 03:00 in Berlin is 02:00 UTC in March (before the DST change).
    assert nightly.latest_fire(datetime(2026, 3, 10, 5, 0, tzinfo=UTC)) == datetime(
        2026, 3, 10, 2, 0, tzinfo=UTC
    )
    assert nightly.latest_fire(datetime(2026, 3, 10, 1, 0, tzinfo=UTC)) == datetime(
        2026, 3, 9, 2, 0, tzinfo=UTC
    )
    assert nightly.period(T0) == timedelta(days=1)
    every_minute = JobSpec("c", "full", cron="* * * * *")
    assert every_minute.latest_fire(T0 + timedelta(seconds=59)) == T0


async def test_run_due_fires_each_tick_once_and_coalesces_missed_ones() -> None:
    clock = Clock(T0 + timedelta(minutes=1))
    fired: list[tuple[str, datetime]] = []

    async def tick(spec: JobSpec, at: datetime) -> str:
        fired.append((spec.id, at))
        return "ran"

    sched = scheduler(tick, clock)
    assert await sched.run_due(T0 + timedelta(minutes=10)) == {}
    assert await sched.run_due(T0 + timedelta(minutes=15)) == {"orders:recent": "ran"}
    assert await sched.run_due(T0 + timedelta(minutes=16)) == {}
    fired.clear()
    # Three hours pass without a tick: each job runs once, for its latest tick.
    out = await sched.run_due(T0 + timedelta(hours=3, minutes=1))
    assert sorted(out) == ["orders:recent", "reviews:recent"]
    assert sorted(fired) == [
        ("orders:recent", T0 + timedelta(hours=3)),
        ("reviews:recent", T0 + timedelta(hours=3)),
    ]


async def test_a_slow_check_does_not_hold_up_another() -> None:
    orders_done = asyncio.Event()

    async def tick(spec: JobSpec, at: datetime) -> str:
        if spec.check == "reviews":
            # Finishes only once the other check's tick has run: they must be concurrent.
            await orders_done.wait()
            return "slow"
        orders_done.set()
        return "fast"

    sched = scheduler(tick, Clock(T0 - timedelta(minutes=1)))
    async with asyncio.timeout(10):
        out = await sched.run_due(T0)
    assert out == {"reviews:recent": "slow", "orders:recent": "fast"}


async def test_started_jobs_are_listed_with_half_a_period_of_grace() -> None:
    async def tick(spec: JobSpec, at: datetime) -> str:
        return "ran"

    sched = scheduler(tick)
    sched.start()
    try:
        assert sched.running
        jobs = {j.id: j for j in sched.jobs()}
        assert set(jobs) == {"orders:recent", "orders:full", "reviews:recent", "reviews:full"}
        assert jobs["orders:recent"].grace_at(T0) == timedelta(seconds=450)
    finally:
        await sched.stop()
    assert not sched.running and sched.jobs() == []


def test_validate_warns_of_a_full_schedule_that_always_falls_on_a_recent_tick() -> None:
    checks = load_text(CONFIG).checks
    warnings = collisions(checks, T0)
    # reviews: 03:00 Berlin is on its hourly grid; orders: 1d from the same anchor as 15m.
    assert [w.split(":")[0] for w in warnings] == [
        "checks.orders.schedule",
        "checks.reviews.schedule",
    ]
    off_grid = load_text(CONFIG.replace('cron: "0 3 * * *"', 'cron: "30 3 * * *"')).checks
    assert [w.split(":")[0] for w in collisions(off_grid, T0)] == ["checks.orders.schedule"]
