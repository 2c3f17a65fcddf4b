"""Retention on the real PostgreSQL: what a prune deletes, what it must keep, and the CLI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from driftgauge.canary.probe import CanaryResult
from driftgauge.canary.store import CanaryStore
from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.core.aggregate import Aggregate
from driftgauge.engine.result import BucketResult, KeyDiff, Node, RunResult
from driftgauge.jobs.recurring import retention_job
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.ledger.models import Batch, KeyOutcome, RunOpen, Summary
from driftgauge.ledger.store import LedgerStore
from driftgauge.retention.job import RetentionJob
from driftgauge.retention.prune import TABLES, prune
from driftgauge.state.store import StateStore

from .service_helpers import REVIEWS_SIDES, STORES, filled, schema_name
from .test_cli import cli

pytestmark = pytest.mark.integration

# Whole hours, so that the CLI (which prunes at its own "now", seconds later) sees every
# row on the same side of every cutoff.
NOW = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
TODAY = NOW.date()

CONFIG = (
    STORES
    + """state: {dsn: "<DSN>", schema: <SCHEMA>, retention: {runs: 30d, ledger: 60d}}
checks:
"""
    + REVIEWS_SIDES
    + """      filter: {bool: {must_not: [{exists: {field: driftgauge_canary}}]}}
    fields: {label: string}
    schedule: {recent: {every: 1h, days: 3}, full: {every: 1d, days: 90}}
    ledger: {job: review-sync}
    canary: {store: dst}
    vocabulary: {label: {accepted: [a, b]}}
    volume: {trailing: 5}
  orders:
    source: {store: src, table: orders, key: id, time: created_at}
    reader: {store: dst, index: orders, key: id, time: created_at}
    schedule: {recent: {every: 1h, days: 3}, full: {every: 1d, days: 5}}
    ledger: {job: quiet-sync}
"""
)

# What the seeded world loses to one prune; everything else in it must stay.
EXPECTED = {
    "runs": 5,
    "buckets": 5,
    "nodes": 10,
    "key_samples": 15,
    "ledger_runs": 4,
    "ledger_batches": 3,
    "ledger_outcomes": 3,
    "ledger_keys": 3,
    "ledger_breaches": 3,
    "ledger_windows": 3,
    "canary_results": 3,
    "vocabulary_results": 1,
    "volume_results": 2,
}


def ago(days: float, hours: float = 0) -> datetime:
    """Return the instant `days` (and `hours`) before NOW."""
    return NOW - timedelta(days=days, hours=hours)


def day(days: int) -> date:
    """Return the day bucket `days` before today."""
    return TODAY - timedelta(days=days)


def config_text(dsn: str, schema: str) -> str:
    """Return the retention test config with its state in `schema` of `dsn`."""
    return filled(CONFIG, dsn, schema)


def bucket(d: date, status: str = "drift") -> BucketResult:
    """Return a day bucket; a drifting one has an hour node, a prefix and 3 sampled keys."""
    start = datetime(d.year, d.month, d.day, tzinfo=UTC)
    if status == "error":
        return BucketResult(start=start, status="error")
    hour = start.replace(hour=3)
    tree = [
        Node(
            "hour",
            hour.isoformat(),
            Aggregate(3, 3, 1),
            Aggregate(2, 2, 2),
            children=[Node("prefix", "a", Aggregate(1, 1, 1), Aggregate(0, 0, 0), fetched=True)],
        )
    ]
    samples = [KeyDiff(f"k{d:%m%d}-{i}", "missing", 1, 0, hour) for i in range(3)]
    return BucketResult(
        start=start,
        status="drift",
        expected=3,
        visible=2,
        missing=1,
        source=Aggregate(3, 3, 1),
        reader=Aggregate(2, 2, 2),
        tree=tree,
        samples=samples,
    )


@dataclass
class World:
    """A state schema seeded with old and new rows of every kind."""

    state: StateStore
    config: Config
    ledger: LedgerStore
    canary: CanaryStore
    runs: dict[str, int] = field(default_factory=dict)
    ledger_runs: dict[str, int] = field(default_factory=dict)

    async def run(
        self,
        name: str,
        check: str,
        days: list[date],
        finished: datetime,
        statuses: list[str] | None = None,
    ) -> None:
        """Store a completed run of `check` that judged `days`."""
        start = datetime.combine(min(days), datetime.min.time(), UTC)
        end = datetime.combine(max(days) + timedelta(days=1), datetime.min.time(), UTC)
        run_id = await self.state.begin_run(
            check, start, end, trigger="recent", started_at=finished - timedelta(minutes=1)
        )
        kinds = statuses or ["drift"] * len(days)
        await self.state.complete_run(
            run_id,
            RunResult(
                check,
                start,
                end,
                started_at=finished - timedelta(minutes=1),
                finished_at=finished,
                buckets=[bucket(d, s) for d, s in zip(days, kinds, strict=True)],
            ),
        )
        self.runs[name] = run_id

    async def ledger_run(
        self,
        name: str,
        job: str,
        window_day: date,
        opened: datetime,
        *,
        keys: list[KeyOutcome] | None = None,
        closed: bool = True,
    ) -> None:
        """Store a ledger run of one day window, with one batch of keys if given."""
        start = datetime.combine(window_day, datetime.min.time(), UTC)
        run, _ = await self.ledger.open_run(
            RunOpen(
                job=job,
                window_start=start,
                window_end=start + timedelta(days=1),
                input_rows=len(keys or []),
            ),
            window_day,
            opened,
        )
        if keys:
            await self.ledger.add_batch(run.id, Batch(batch_id="b1", keys=keys), opened)
        if closed:
            await self.ledger.close_run(
                run.id, Summary(status="success"), opened + timedelta(hours=1)
            )
        self.ledger_runs[name] = run.id

    async def table_counts(self) -> dict[str, int]:
        """Return the rows in every table retention prunes."""
        async with self.state.calls.conn("count rows") as conn:
            return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}


def no_match(key: str) -> KeyOutcome:
    """Return a key the sync job reported as not written for lack of a document."""
    return KeyOutcome(key=key, outcome="no_match", reason="no_document")


async def seed(w: World) -> None:
    """Store runs, ledger rows, canary attempts and signals, old and new."""
    # Reconciliation runs of `reviews` (full-history window: 90 days) and of a check no
    # longer configured; runs are kept 30 days.
    await w.run("superseded", "reviews", [day(80), day(79)], ago(79))
    await w.run("served_old", "reviews", [day(80), day(79)], ago(75))  # latest for both
    # A bucket in error (an unexplained difference) is the day's verdict: it is served,
    # and the older drift it replaced goes like any superseded run.
    await w.run("behind_error", "reviews", [day(78)], ago(77))
    await w.run("error_bucket", "reviews", [day(78)], ago(76), ["error"])
    await w.run("outside_window", "reviews", [day(130)], ago(129))
    failed = await w.state.begin_run(
        "reviews", ago(41), ago(40), trigger="recent", started_at=ago(40)
    )
    await w.state.fail_run(failed, "StoreUnavailable: reader: refused", finished_at=ago(40))
    w.runs["failed"] = failed
    await w.run("young_superseded", "reviews", [day(2)], ago(2))
    await w.run("latest", "reviews", [day(2), day(1)], ago(1))
    w.runs["running_old"] = await w.state.begin_run(
        "reviews", ago(100), ago(99), trigger="full", started_at=ago(100)
    )
    await w.run("legacy", "legacy", [day(70)], ago(70))
    w.runs["legacy_running"] = await w.state.begin_run(
        "legacy", ago(100), ago(99), trigger="recent", started_at=ago(100)
    )

    # The run ledger (kept 60 days): review-sync feeds `reviews`, quiet-sync `orders`
    # (full-history window: 5 days), old-job nothing any more.
    await w.ledger_run(
        "needed",
        "review-sync",
        day(85),
        ago(84),
        keys=[
            no_match("k1"),
            KeyOutcome(key="k2", outcome="skipped", reason="unchanged"),
            KeyOutcome(key="k3", outcome="failed", error="Timeout"),
        ],
    )
    await w.ledger_run("old", "review-sync", day(130), ago(129), keys=[no_match("o1")])
    await w.ledger_run("never_closed", "review-sync", day(160), ago(159), closed=False)
    await w.ledger_run("young", "review-sync", day(1), ago(0, 10))
    await w.ledger_run("quiet_older", "quiet-sync", day(160), ago(159), keys=[no_match("q0")])
    await w.ledger_run("quiet_latest", "quiet-sync", day(130), ago(129))
    await w.ledger_run("gone_job", "old-job", day(160), ago(159), keys=[no_match("x1")])
    for job, d, evaluated, rule in [
        ("review-sync", day(130), ago(128), "failed_writes"),
        ("review-sync", day(1), ago(0, 1), "nothing_written"),
        ("quiet-sync", day(130), ago(128), "missing_summary"),  # its latest window
        ("quiet-sync", day(160), ago(158), "failed_writes"),
        ("old-job", day(160), ago(158), "failed_writes"),
    ]:
        await w.ledger.record_evaluation(job, d, True, {rule: "seeded"}, evaluated)  # type: ignore[dict-item]
        if (job, d) in {("review-sync", day(130)), ("quiet-sync", day(160))}:
            # Judged again a day later and found to hold: the breach closed.
            await w.ledger.record_evaluation(job, d, True, {}, evaluated + timedelta(days=1))

    # Canary attempts (kept 60 days): the latest and the latest success stay at any age.
    for check, result, at in [
        ("reviews", "ok", ago(130)),
        ("reviews", "timeout", ago(129)),
        ("reviews", "ok", ago(100)),
        ("reviews", "not_visible", ago(99)),
        ("legacy", "ok", ago(130)),
    ]:
        await w.canary.record(CanaryResult(check, result, at, 1.5, "k1"))  # type: ignore[arg-type]

    async with w.state.calls.conn("seed signals") as conn:
        await conn.executemany(
            "INSERT INTO vocabulary_results (check_name, field, computed_at, window_start,"
            " window_end, unmatched_values, unmatched_rows) VALUES ($1, $2, $3, $3, $3, 0, 0)",
            [
                ("reviews", "label", ago(150)),
                ("reviews", "gone_field", ago(150)),
                ("legacy", "label", ago(9)),
            ],
        )
        await conn.executemany(
            "INSERT INTO volume_results (check_name, day, computed_at, distinct_keys, mean,"
            " sd, low, high, anomaly) VALUES ($1, $2, $3, 10, 10, 1, 7, 13, false)",
            [
                ("reviews", day(150), ago(150)),
                ("legacy", day(151), ago(150)),
                ("legacy", day(150), ago(150)),
            ],
        )


@pytest.fixture
async def world(pg_database: str) -> AsyncIterator[World]:
    """Yield a freshly seeded state schema in the module's database."""
    config = load_text(config_text(pg_database, schema_name()))
    state = await StateStore.open(config.state, deadline=10)
    try:
        w = World(state, config, LedgerStore(state.calls.pool), CanaryStore(state.calls.pool))
        await seed(w)
        yield w
    finally:
        await state.close()


async def served(w: World) -> dict[str, Any]:
    """Return what the API and /metrics read for the configured checks and jobs."""
    s = w.state
    out: dict[str, Any] = {}
    for check in ("reviews", "orders"):
        days = await s.day_buckets(check, day(89), TODAY)
        out[check] = {
            "days": [(d.run_id, d.bucket.start.date()) for d in days],
            "latest": [
                await s.latest_finished_run(check),
                await s.latest_completed_run(check),
                await s.latest_success(check),
            ],
            "counts": await s.run_counts(check),
        }
    out["nodes"] = [await s.day_nodes(w.runs["served_old"], day(80))]
    out["keys"] = await s.keys(w.runs["served_old"], day(80))
    out["ledger"] = await w.ledger.snapshot(["quiet-sync", "review-sync"])
    full_start = datetime.combine(day(89), datetime.min.time(), UTC)
    out["excused"] = await w.ledger.excused_keys("review-sync", full_start, NOW)
    out["canary"] = await w.canary.snapshot(["reviews"])
    return out


async def test_old_runs_and_their_children_go_in_small_batches(world: World) -> None:
    report = await prune(world.state, world.config, NOW, batch=2)
    assert not report.dry_run and not report.skipped
    assert report.deleted == EXPECTED
    left = {r.id for c in ("reviews", "legacy") for r in await world.state.runs(c, limit=100)}
    gone = {"superseded", "behind_error", "outside_window", "failed", "legacy"}
    assert left == {i for name, i in world.runs.items() if name not in gone}
    async with world.state.calls.conn("count children") as conn:
        for table in ("buckets", "nodes", "key_samples"):
            orphans = await conn.fetchval(
                f"SELECT count(*) FROM {table} WHERE run_id = ANY($1::bigint[])",
                [world.runs[n] for n in gone],
            )
            assert orphans == 0, table


async def test_the_latest_completed_run_of_each_served_day_and_running_runs_survive(
    world: World,
) -> None:
    before = await served(world)
    assert before["reviews"]["days"][:3] == [
        (world.runs["served_old"], day(80)),
        (world.runs["served_old"], day(79)),
        (world.runs["error_bucket"], day(78)),
    ]
    await prune(world.state, world.config, NOW)
    assert await served(world) == before
    for name in ("running_old", "legacy_running", "served_old", "error_bucket"):
        run = await world.state.run(
            "legacy" if name.startswith("legacy") else "reviews", world.runs[name]
        )
        assert run is not None, name
    # The runs counter keeps counting the runs it deleted.
    assert before["reviews"]["counts"] == {"drift": 6, "error": 2}


async def test_ledger_canary_and_signals_rows_still_needed_stay(world: World) -> None:
    await prune(world.state, world.config, NOW)
    left = {r.id for r in await world.ledger.runs(None, limit=100)}
    assert left == {world.ledger_runs[n] for n in ("needed", "young", "quiet_latest")}
    assert [k.key for k in await world.ledger.keys(world.ledger_runs["needed"])] == [
        "k1",
        "k2",
        "k3",
    ]
    windows = {(w.job, w.window_day) for w in await world.ledger.windows(None, limit=100)}
    assert windows == {("review-sync", day(1)), ("quiet-sync", day(130))}
    breaches = {(b.job, b.rule) for b in await world.ledger.breaches(None)}
    assert breaches == {("review-sync", "nothing_written"), ("quiet-sync", "missing_summary")}
    attempts = await world.canary.history("reviews")
    assert [a.result for a in attempts] == ["not_visible", "ok"]
    assert await world.canary.history("legacy") == []
    async with world.state.calls.conn("read signals") as conn:
        vocab = await conn.fetch("SELECT check_name, field FROM vocabulary_results ORDER BY 1, 2")
        volume = await conn.fetch("SELECT check_name FROM volume_results")
    assert [tuple(r) for r in vocab] == [("legacy", "label"), ("reviews", "label")]
    assert [r["check_name"] for r in volume] == ["reviews"]


async def test_an_open_breach_keeps_its_window_and_runs_at_any_age(world: World) -> None:
    await world.ledger_run("open_old", "review-sync", day(200), ago(199), keys=[no_match("p1")])
    run_id = world.ledger_runs["open_old"]
    await world.ledger.record_evaluation(
        "review-sync", day(200), True, {"duplicate_summary": "seeded"}, ago(198)
    )
    await prune(world.state, world.config, NOW)
    open_now = {
        (b.job, b.window_day, b.rule) for b in await world.ledger.breaches(None, active_only=True)
    }
    assert ("review-sync", day(200), "duplicate_summary") in open_now
    assert [k.key for k in await world.ledger.keys(run_id)] == ["p1"]
    windows = {(w.job, w.window_day) for w in await world.ledger.windows(None, limit=100)}
    assert ("review-sync", day(200)) in windows


async def test_counters_on_metrics_never_go_down(world: World) -> None:
    before = await served(world)
    await prune(world.state, world.config, NOW)
    after = await served(world)
    assert (
        after["ledger"].runs
        == before["ledger"].runs
        == {("review-sync", "success"): 3, ("quiet-sync", "success"): 2}
    )
    assert after["ledger"].breaches == before["ledger"].breaches
    assert after["canary"].runs == before["canary"].runs
    assert after["excused"] == before["excused"] == {"k1": "no_document", "k2": "unchanged"}


async def test_a_dry_run_counts_what_a_prune_deletes_and_deletes_nothing(world: World) -> None:
    rows = await world.table_counts()
    dry = await prune(world.state, world.config, NOW, dry_run=True)
    assert dry.dry_run and dry.deleted == EXPECTED
    assert await world.table_counts() == rows
    real = await prune(world.state, world.config, NOW)
    assert real.deleted == dry.deleted
    after = await world.table_counts()
    assert {t: rows[t] - after[t] for t in TABLES} == EXPECTED


async def test_a_second_prune_is_a_no_op(world: World) -> None:
    first = await prune(world.state, world.config, NOW)
    rows = await world.table_counts()
    second = await prune(world.state, world.config, NOW)
    assert first.total == sum(EXPECTED.values())
    assert second.total == 0 and set(second.deleted) == set(TABLES)
    assert await world.table_counts() == rows


async def test_a_replica_skips_while_another_prunes(world: World) -> None:
    rows = await world.table_counts()
    async with world.state.prune_lock() as got:
        assert got
        report = await prune(world.state, world.config, NOW)
    assert report.skipped and report.total == 0
    assert await world.table_counts() == rows
    assert (await prune(world.state, world.config, NOW)).total == sum(EXPECTED.values())


async def test_the_daily_job_prunes_in_the_background_and_stops(world: World) -> None:
    job = RetentionJob(world.state, world.config, clock=lambda: NOW, first_after=timedelta(0))
    jobs = JobRuntime()
    jobs.add(retention_job(job))
    jobs.start()
    try:
        for _ in range(200):
            if job.last is not None:
                break
            await asyncio.sleep(0.05)
        assert jobs.running
    finally:
        await jobs.stop()
    assert not jobs.running
    assert job.last is not None and job.last.deleted == EXPECTED


async def test_cli_state_prune_dry_run_prints_per_table_and_deletes_nothing(
    world: World, tmp_path: Path
) -> None:
    path = tmp_path / "dg.yml"
    path.write_text(config_text(world.config.state.dsn.reveal(), world.config.state.schema))
    rows = await world.table_counts()
    done = await asyncio.to_thread(cli, "state", "prune", "--config", str(path), "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = dict(line.split() for line in done.stdout.splitlines()[1:])
    assert {t: int(lines[t]) for t in TABLES} == EXPECTED
    assert int(lines["total"]) == sum(EXPECTED.values())
    assert "would delete (dry run)" in done.stdout.splitlines()[0]
    assert await world.table_counts() == rows


def test_cli_state_prune_names_a_bad_retention_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "dg.yml"
    path.write_text(
        config_text("postgresql://unused@127.0.0.1:1/unused", "dg_x").replace(
            "runs: 30d", "runs: 3 months"
        )
    )
    done = cli("state", "prune", "--config", str(path))
    assert done.returncode == 2
    assert "state.retention.runs: '3 months' is not a duration" in done.stderr
    assert "Traceback" not in done.stderr
