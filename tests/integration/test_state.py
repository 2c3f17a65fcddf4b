"""The state database on the real PostgreSQL: migrations, run lifecycle, round trips."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import pytest

from driftgauge.config.frozen import State
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import StateError
from driftgauge.core.paging import Page
from driftgauge.engine.result import BucketResult, KeyDiff
from driftgauge.state.migrate import migrations
from driftgauge.state.samples import KeyFilter
from driftgauge.state.store import StateStore
from tests.oracle import FIELDS

from .service_helpers import DAY0, NOW, make_config, sample_result, schema_name

pytestmark = pytest.mark.integration


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[StateStore]:
    """Yield a state store in a fresh schema of the module's database."""
    s = await StateStore.open(State(Secret(pg_database), schema_name()), deadline=10)
    try:
        yield s
    finally:
        await s.close()


async def test_migrations_apply_once_even_when_replicas_start_together(pg_database: str) -> None:
    state = State(Secret(pg_database), schema_name())
    stores = await asyncio.gather(*(StateStore.open(state) for _ in range(3)))
    try:
        assert await stores[0].migrate() == []
        conn = await asyncpg.connect(pg_database, timeout=10)
        try:
            rows = await conn.fetch(f"SELECT version, name FROM {state.schema}.schema_migrations")
        finally:
            await conn.close()
        assert sorted(r["version"] for r in rows) == [m.version for m in migrations()]
        assert rows[0]["name"] == "initial"
    finally:
        for s in stores:
            await s.close()


async def test_round_trip_of_a_run_result(store: StateStore) -> None:
    result = sample_result()
    run_id = await store.begin_run(
        "reviews", result.window_start, result.window_end, trigger="cli", started_at=NOW
    )
    await store.complete_run(run_id, result, sample_keys=5)
    run = await store.latest_completed_run("reviews")
    assert run is not None and run.id == run_id and run.status == "drift" and run.complete
    assert (run.queries, run.rows_fetched) == (12, 40)
    assert run.duration_seconds == pytest.approx(3.0)

    days = await store.day_buckets("reviews", DAY0.date(), (DAY0 + timedelta(days=5)).date())
    assert [d.bucket.start.date() for d in days] == [DAY0.date(), (DAY0 + timedelta(1)).date()]
    got, want = days[0].bucket, result.buckets[0]
    for f in (*FIELDS, "source", "reader", "reasons", "ledger_excluded"):
        assert getattr(got, f) == getattr(want, f), f
    assert got.source.digest == (1 << 64) - 5  # above 2^63: stored exactly

    hours, day_prefixes = await store.day_nodes(run_id, DAY0.date())
    assert [h.label for h in hours] == [n.label for n in want.tree[:2]]
    assert all(not h.children for h in hours)
    assert [p.label for p in day_prefixes] == ["f"]
    node = await store.hour_tree(run_id, DAY0.date(), DAY0.replace(hour=3))
    assert node is not None and node.to_dict() == want.tree[1].to_dict()
    assert await store.hour_tree(run_id, DAY0.date(), DAY0.replace(hour=9)) is None

    total, page = await store.keys(run_id, DAY0.date(), KeyFilter(kind="missing"), Page(2, 2))
    assert total == 5  # 7 sampled by the engine, capped at 5 per kind when stored
    assert [k.diff.key for k in page] == ["m002", "m003"]
    total, _ = await store.keys(run_id, DAY0.date())
    assert total == 7
    hour3 = DAY0.replace(hour=3)
    total, only = await store.keys(
        run_id, DAY0.date(), KeyFilter(start=hour3, end=hour3 + timedelta(minutes=2))
    )
    assert sorted(str(k.diff.key) for k in only) == ["dup", "m000", "m001"]


async def test_keys_filter_by_key_hash_prefix(store: StateStore) -> None:
    result = sample_result()
    run_id = await store.begin_run("reviews", result.window_start, result.window_end, trigger="cli")
    await store.complete_run(run_id, result, key_hash=lambda k: "ab" + k if k < "m003" else "cd")
    total, keys = await store.keys(run_id, DAY0.date(), KeyFilter(prefix="ab"))
    assert total == 4 and {k.key_hash for k in keys} == {"abdup", "abm000", "abm001", "abm002"}


async def test_a_failed_write_leaves_the_run_running_and_nothing_visible(store: StateStore) -> None:
    result = sample_result()
    run_id = await store.begin_run("reviews", result.window_start, result.window_end, trigger="cli")
    # The second bucket violates a CHECK constraint half-way through the transaction.
    bad = dataclasses.replace(result.buckets[1], status="bogus")  # type: ignore[arg-type]
    broken = dataclasses.replace(result, buckets=[result.buckets[0], bad])
    with pytest.raises(StateError, match="complete a run"):
        await store.complete_run(run_id, broken)
    runs = await store.runs("reviews")
    assert [(r.id, r.status, r.complete) for r in runs] == [(run_id, "running", False)]
    assert await store.latest_completed_run("reviews") is None
    assert await store.day_buckets("reviews", DAY0.date(), DAY0.date()) == []
    total, _ = await store.keys(run_id, DAY0.date())
    assert total == 0

    await store.fail_run(run_id, "StoreUnavailable: reader: connection refused")
    failed = await store.run("reviews", run_id)
    assert failed is not None and failed.status == "error" and not failed.complete
    assert failed.error is not None and "connection refused" in failed.error
    with pytest.raises(StateError, match="not running"):
        await store.complete_run(run_id, result)


async def test_each_day_comes_from_the_latest_completed_run_covering_it(store: StateStore) -> None:
    first = sample_result()
    r1 = await store.begin_run("reviews", first.window_start, first.window_end, trigger="t")
    await store.complete_run(r1, first)
    # A later run judges only the second day; a failed run after it changes nothing.
    later = dataclasses.replace(
        first,
        finished_at=NOW + timedelta(hours=1),
        buckets=[BucketResult(start=DAY0 + timedelta(days=1), status="ok", expected=6, visible=6)],
    )
    r2 = await store.begin_run("reviews", first.window_start, first.window_end, trigger="t")
    await store.complete_run(r2, later)
    r3 = await store.begin_run("reviews", first.window_start, first.window_end, trigger="t")
    await store.fail_run(r3, "boom")
    days = await store.day_buckets("reviews", DAY0.date(), (DAY0 + timedelta(days=1)).date())
    assert [(d.run_id, d.bucket.status, d.bucket.expected) for d in days] == [
        (r1, "drift", 110),
        (r2, "ok", 6),
    ]
    assert (await store.latest_runs())["reviews"].id == r3
    finished = await store.latest_finished_run("reviews")
    success = await store.latest_success("reviews")
    assert finished is not None and finished.id == r3
    assert success is not None and success.id == r2
    assert await store.run_counts("reviews") == {"drift": 1, "ok": 1, "error": 1}


async def test_one_run_per_tick_and_the_guard_against_clock_skew(store: StateStore) -> None:
    tick = NOW.replace(minute=0)
    kw = {"trigger": "recent", "scheduled_for": tick, "guard": timedelta(minutes=30)}
    first = await store.claim_tick("reviews", DAY0, NOW, started_at=NOW, **kw)  # type: ignore[arg-type]
    again = await store.claim_tick("reviews", DAY0, NOW, started_at=NOW, **kw)  # type: ignore[arg-type]
    assert first is not None and again is None

    async def claim(trigger: str, scheduled_for: datetime, started_at: datetime) -> int | None:
        return await store.claim_tick(
            "reviews",
            DAY0,
            NOW,
            trigger=trigger,
            scheduled_for=scheduled_for,
            started_at=started_at,
            guard=timedelta(minutes=30),
        )

    # A replica whose clock put the same tick a grid step later is caught by the guard.
    skewed = await claim("recent", tick + timedelta(hours=1), NOW + timedelta(minutes=1))
    assert skewed is None
    other_job = await claim("full", tick, NOW)
    next_tick = await claim("recent", tick + timedelta(hours=1), NOW + timedelta(hours=1))
    assert other_job is not None and next_tick is not None


async def test_the_check_lock_is_exclusive_across_connections(store: StateStore) -> None:
    async with store.check_lock("reviews") as got:
        assert got
        async with store.check_lock("reviews") as second, store.check_lock("orders") as other:
            assert not second and other
    async with store.check_lock("reviews") as again:
        assert again


async def test_abandoned_runs_are_failed_not_completed(store: StateStore) -> None:
    old = await store.begin_run(
        "reviews", DAY0, NOW, trigger="t", started_at=NOW - timedelta(days=1)
    )
    fresh = await store.begin_run("reviews", DAY0, NOW, trigger="t", started_at=NOW)
    assert await store.abandon_stale(NOW - timedelta(hours=6), "abandoned") == 1
    by_id = {r.id: r for r in await store.runs("reviews")}
    assert by_id[old].status == "error" and by_id[old].error == "abandoned"
    assert by_id[fresh].status == "running"


async def test_an_unreachable_state_database_is_a_state_error_naming_the_field() -> None:
    cfg = make_config("postgresql://postgres@127.0.0.1:1/none", "dg_x")
    with pytest.raises(StateError, match=r"^state\.dsn: cannot connect"):
        await StateStore.open(cfg.state, deadline=3)


async def test_a_null_key_is_stored_and_read_back_as_null(store: StateStore) -> None:
    result = sample_result()
    hour = DAY0.replace(hour=3)
    result.buckets[0].samples = [
        KeyDiff(None, "missing", 1, 0, hour, key_hash="n1"),
        KeyDiff("", "extra", 0, 1, hour, key_hash="e1"),
    ]
    run_id = await store.begin_run("reviews", result.window_start, result.window_end, trigger="cli")
    await store.complete_run(run_id, result, key_hash=lambda k: "h" + k)
    total, keys = await store.keys(run_id, DAY0.date())
    got = {(k.diff.key, k.key_hash) for k in keys}
    assert total == 2 and got == {(None, "n1"), ("", "e1")}
    assert {k.to_dict()["key"] for k in keys} == {None, ""}
