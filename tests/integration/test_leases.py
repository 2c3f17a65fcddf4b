"""Run leases and job claims on the real state database: a dead replica's run expires once."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftgauge.config.frozen import Config, Lease
from driftgauge.core.clock import ManualClock
from driftgauge.core.errors import StateError
from driftgauge.jobs.heartbeat import LeaseKeeper
from driftgauge.jobs.recurring import heartbeat_job
from driftgauge.jobs.runtime import Job, JobRuntime
from driftgauge.jobs.schedule import every
from driftgauge.metrics.collector import build_registry
from driftgauge.metrics.snapshot import SnapshotCache, interrupted_part, state_part
from driftgauge.state.reads import Reads
from driftgauge.state.store import StateStore

from .service_helpers import NOW, make_config, schema_name
from .state_helpers import stores_fixture

pytestmark = pytest.mark.integration
DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
SHORT = Lease(heartbeat=timedelta(seconds=0.2), expires=timedelta(seconds=1))


@pytest.fixture
async def config(pg_database: str) -> Config:
    return make_config(pg_database, schema_name())


stores = stores_fixture(2)


async def begin(store: StateStore) -> int:
    return await store.begin_run(
        "reviews", NOW - timedelta(days=1), NOW, trigger="manual", started_at=NOW
    )


async def test_a_run_nobody_renews_expires_as_interrupted_once(stores: list[StateStore]) -> None:
    dead, survivor = stores
    run_id = await begin(dead)
    dead.owned.clear()  # the replica died: nothing renews the run any more
    keepers = [LeaseKeeper(s, SHORT) for s in stores]
    assert await keepers[1].expire() == []  # still within its lease
    await asyncio.sleep(1.3)
    # Both replicas expire at once: the run is marked, and counted, exactly once.
    gone = await asyncio.gather(*(k.expire() for k in keepers))
    assert sorted(g for got in gone for g in got) == [(run_id, "reviews")]
    run = await survivor.run("reviews", run_id)
    assert run is not None and run.status == "error" and not run.complete
    assert run.error is not None and run.error.startswith("interrupted: replica replica-0 ")
    assert run.finished_at is not None
    assert await survivor.leases.interrupted("reviews") == 1
    assert (await survivor.run_counts("reviews")).get("error") == 1


async def test_a_renewed_run_outlives_its_lease(stores: list[StateStore]) -> None:
    live, other = stores
    run_id = await begin(live)
    jobs = JobRuntime()
    jobs.add(heartbeat_job(LeaseKeeper(live, SHORT)))
    jobs.start()
    try:
        await asyncio.sleep(2.0)
        assert await LeaseKeeper(other, SHORT).expire() == []
    finally:
        await jobs.stop()
    run = await other.run("reviews", run_id)
    assert run is not None and run.status == "running"
    await asyncio.sleep(1.3)
    assert await LeaseKeeper(other, SHORT).expire() == [(run_id, "reviews")]


async def test_a_run_recorded_late_after_expiry_is_refused(stores: list[StateStore]) -> None:
    slow, other = stores
    run_id = await begin(slow)
    slow.owned.clear()
    await asyncio.sleep(1.3)
    await LeaseKeeper(other, SHORT).expire()
    assert await slow.leases.renew([run_id]) == set()
    assert not await slow.leases.interrupt(
        run_id, "late", finished_at=datetime.now(UTC), duration=None
    )
    assert await other.leases.interrupted("reviews") == 1


async def test_each_scheduled_time_is_claimed_by_one_replica(stores: list[StateStore]) -> None:
    times = [NOW + timedelta(minutes=i) for i in range(10)]
    got = await asyncio.gather(
        *(s.claims.claim("canary:reviews", t) for t in times for s in stores)
    )
    assert sum(got) == len(times)
    for t in times:
        assert await stores[0].claims.claimed_by("canary:reviews", t) in ("replica-0", "replica-1")
    assert not await stores[1].claims.claim("canary:reviews", times[0])
    assert await stores[1].claims.claim("canary:orders", times[0])  # another job


async def test_two_job_runtimes_on_one_state_database_run_each_claimed_time_once(
    stores: list[StateStore],
) -> None:
    clock = ManualClock(NOW)
    ran: list[tuple[str, datetime]] = []
    runtimes = []
    for store in stores:

        async def prune(at: datetime, who: str = store.claims.replica) -> None:
            ran.append((who, at))

        rt = JobRuntime(clock, claims=store.claims)
        rt.add(Job("retention", "retention", prune, every(timedelta(minutes=1)), claim="retention"))
        runtimes.append(rt)
    for i in (1, 2, 3):
        await clock.set(NOW + timedelta(minutes=i))
        outcomes = await asyncio.gather(*(rt.run_due() for rt in runtimes))
        assert sorted(o["retention"] for o in outcomes) == ["ran", "taken"]
    times = [NOW.replace(second=0, microsecond=0) + timedelta(minutes=i) for i in (1, 2, 3)]
    assert sorted(at for _, at in ran) == times
    for who, at in ran:
        assert await stores[0].claims.claimed_by("retention", at) == who


async def test_a_job_lock_keeps_a_long_attempt_from_meeting_the_next(
    stores: list[StateStore],
) -> None:
    async with stores[0].claims.lock("canary:reviews") as first:
        async with stores[1].claims.lock("canary:reviews") as second:
            assert (first, second) == (True, False)
        async with stores[1].claims.lock("canary:orders") as other:
            assert other
    async with stores[1].claims.lock("canary:reviews") as after:
        assert after


async def test_state_part_says_when_the_state_database_stops_answering(config: Config) -> None:
    store = await StateStore.open(config.state, replica="replica-x")
    clock_at = [NOW]
    cache = SnapshotCache(store, config.checks, lambda: clock_at[0])
    reg = build_registry([state_part(cache), interrupted_part(cache.current)])
    await cache.refresh()
    assert reg.get_sample_value("driftgauge_state_up") == 1
    assert reg.get_sample_value("driftgauge_snapshot_age_seconds") == 0
    assert (
        reg.get_sample_value("driftgauge_state_last_refresh_timestamp_seconds") == NOW.timestamp()
    )
    assert (
        reg.get_sample_value("driftgauge_check_interrupted_runs_total", {"check": "reviews"}) == 0
    )
    await store.close()
    clock_at[0] = NOW + timedelta(seconds=90)
    with pytest.raises(StateError):
        await cache.refresh()
    assert reg.get_sample_value("driftgauge_state_up") == 0
    assert reg.get_sample_value("driftgauge_snapshot_age_seconds") == 90
    assert (
        reg.get_sample_value("driftgauge_state_last_refresh_timestamp_seconds") == NOW.timestamp()
    )


async def expired_run(stores: list[StateStore]) -> int:
    """Begin a run on the first store, let it die, and wait out its lease."""
    run_id = await begin(stores[0])
    stores[0].owned.clear()
    await asyncio.sleep(1.3)
    return run_id


async def test_a_snapshot_read_sees_no_commit_made_while_it_reads(
    stores: list[StateStore],
) -> None:
    dead, survivor = stores
    run_id = await expired_run(stores)
    async with survivor.snapshot("read one moment", reads=2) as view:
        assert await view.latest_finished_run("reviews") is None
        # The run is expired and counted, and committed, between the two reads.
        assert await LeaseKeeper(dead, SHORT).expire() == [(run_id, "reviews")]
        assert (await view.run_totals("reviews")) == ({}, 0)
    counts, interrupted = await survivor.run_totals("reviews")
    assert (counts, interrupted) == ({"error": 1}, 1)
    last = await survivor.latest_finished_run("reviews")
    assert last is not None and last.id == run_id


class SlowFirstRefresh:
    """The state store, but the first snapshot stalls after its first read until told."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.stalled = asyncio.Event()
        self.go_on = asyncio.Event()
        self._first = True

    @asynccontextmanager
    async def snapshot(self, what: str, *, reads: int = 1) -> AsyncIterator[Reads]:
        async with self.store.snapshot(what, reads=reads) as view:
            if self._first:
                self._first = False
                await view.latest_finished_run("reviews")  # the transaction's moment is now
                self.stalled.set()
                await self.go_on.wait()
            yield view


async def test_a_refresh_begun_before_an_expiry_never_overwrites_the_one_after(
    config: Config, stores: list[StateStore]
) -> None:
    dead, survivor = stores
    run_id = await expired_run(stores)
    slow = SlowFirstRefresh(survivor)
    only = {"reviews": config.checks["reviews"]}  # one check: the stalled read is its own
    cache = SnapshotCache(slow, only)  # type: ignore[arg-type]
    reg = build_registry([state_part(cache), interrupted_part(cache.current)])
    periodic = asyncio.create_task(cache.refresh())
    await slow.stalled.wait()
    keeper = LeaseKeeper(dead, SHORT, on_expired=cache.refresh)
    after = asyncio.create_task(keeper.expire())
    await asyncio.sleep(0.3)  # the expiry has committed; its refresh waits its turn
    slow.go_on.set()
    assert await after == [(run_id, "reviews")]
    await periodic
    snap = cache.current()["reviews"]
    assert snap.interrupted == 1 and snap.run_counts == {"error": 1}
    assert snap.last_run is not None and snap.last_run.id == run_id
    assert (
        reg.get_sample_value("driftgauge_check_interrupted_runs_total", {"check": "reviews"}) == 1
    )


def _documented_section(title: str) -> dict[str, tuple[str, set[str]]]:
    out: dict[str, tuple[str, set[str]]] = {}
    current = ""
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
        m = re.match(r"\| `(driftgauge_\w+)` \| (\w+) \|([^|]*)\|", line)
        if m and current == title:
            out[m.group(1)] = (m.group(2), set(re.findall(r"`(\w+)`", m.group(3))))
    return out


async def test_state_part_matches_the_documented_series(
    config: Config, stores: list[StateStore]
) -> None:
    cache = SnapshotCache(stores[0], config.checks)
    await cache.refresh()
    text = generate_latest(
        build_registry([state_part(cache), interrupted_part(cache.current)])
    ).decode()
    seen = {}
    for fam in text_string_to_metric_families(text):
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        seen[name] = (fam.type, set().union(*(set(s.labels) for s in fam.samples)))
    assert seen == _documented_section("Runs and state")
