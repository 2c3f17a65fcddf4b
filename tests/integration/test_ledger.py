"""The run ledger on the real state database, through its REST API and Python client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
import yaml
from fastapi import FastAPI
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.api.audit import audit_router
from driftgauge.api.auth import TokenCheck
from driftgauge.app.audit import open_audit
from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.engine.reconcile import reconcile
from driftgauge.ledger.client import LedgerClient
from driftgauge.ledger.metrics import LedgerMetrics
from driftgauge.ledger.models import RULES
from driftgauge.ledger.service import LedgerService, ledger_exclusions
from driftgauge.ledger.store import LedgerStore
from driftgauge.stores import open_adapter
from tests.integration.service_helpers import REVIEWS_SOURCE, STORES, Clock
from tests.integration.signals_support import (
    TIERS_NOT_CANARY,
    TOKEN,
    ledger_app,
    migrated_schema,
    registry_of,
    reviews_raw,
    state_pool,
)
from tests.store_fixtures import create_index

pytestmark = pytest.mark.integration
JOB = {"sync_job": "review-sync"}

DAY = datetime(2024, 5, 6, tzinfo=UTC)
# The ledger never reads the check's stores: the unused ones of the service tests do.
CONFIG = (
    STORES
    + """state: {dsn: "postgresql://unused@127.0.0.1:1/x"}
checks:
"""
    + REVIEWS_SOURCE
    + """    reader: {store: dst, index: conv, key: task_id, time: completed_at}
    ledger: {job: review-sync, summary_deadline: 6h, no_match_rate: 0.05}
"""
)


@dataclass
class Ledger:
    """One test's ledger: service, HTTP client, clock and metrics part."""

    config: Config
    service: LedgerService
    http: httpx.AsyncClient
    transport: httpx.ASGITransport
    clock: Clock
    metrics: LedgerMetrics

    def client(self, **kw: Any) -> LedgerClient:
        """Return a LedgerClient for one run of review-sync over DAY."""
        args: dict[str, Any] = {
            "job": "review-sync",
            "window_start": DAY,
            "window_end": DAY + timedelta(days=1),
            "input_rows": 10,
        }
        args.update(kw)
        return LedgerClient("http://dg", token=TOKEN, transport=self.transport, **args)

    async def post(
        self, path: str, body: dict[str, Any], token: str | None = TOKEN
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await self.http.post(f"/api/v1/ledger{path}", json=body, headers=headers)

    async def scrape(self) -> Any:
        await self.metrics.refresh()
        return registry_of(self.metrics).get_sample_value


@asynccontextmanager
async def open_ledger(dsn: str, config: Config) -> AsyncIterator[Ledger]:
    """Yield a ledger on a fresh state schema, served over ASGI, with a hand-moved clock."""
    clock = Clock(DAY + timedelta(days=1, hours=1))
    async with state_pool(dsn) as pool:
        store = LedgerStore(pool)
        service = LedgerService(store, config.checks, clock=clock)
        transport = httpx.ASGITransport(app=ledger_app(service))
        async with httpx.AsyncClient(transport=transport, base_url="http://dg") as http:
            yield Ledger(
                config, service, http, transport, clock, LedgerMetrics(store, ["review-sync"])
            )


@pytest.fixture
async def ledger(pg_database: str) -> AsyncIterator[Ledger]:
    async with open_ledger(pg_database, load_text(CONFIG)) as led:
        yield led


def open_body(input_rows: int = 10, **kw: Any) -> dict[str, Any]:
    body = {
        "job": "review-sync",
        "window_start": DAY.isoformat(),
        "window_end": (DAY + timedelta(days=1)).isoformat(),
        "input_rows": input_rows,
    }
    body.update(kw)
    return body


async def test_a_healthy_run_breaches_nothing_and_is_exported(ledger: Ledger) -> None:
    async with ledger.client(input_rows=40) as run:
        await run.written([f"t{i}" for i in range(38)])
        await run.no_match({"t38": "no_document"})  # 2.5%, under the 5% limit
        await run.skipped({"t39": "no_join_key"})
    got = (await ledger.http.get(f"/api/v1/ledger/runs/{run.run_id}")).json()
    assert got["status"] == "success" and got["batches"] == 1
    assert got["outcomes"] == {"written": 38, "no_match": 1, "skipped": 1, "failed": 0}
    assert got["reasons"] == {"no_match": {"no_document": 1}, "skipped": {"no_join_key": 1}}
    v = await ledger.scrape()
    for rule in RULES:
        assert v("driftgauge_ledger_breach", {**JOB, "rule": rule}) == 0
        assert v("driftgauge_ledger_breaches_total", {**JOB, "rule": rule}) == 0
    assert v("driftgauge_ledger_runs_total", {**JOB, "status": "success"}) == 1
    assert (
        v("driftgauge_ledger_last_closed_run_timestamp_seconds", JOB)
        == ledger.clock.now.timestamp()
    )
    # Past the deadline the window is still clean: it has exactly one summary.
    await ledger.service.evaluate_all(DAY + timedelta(days=2))
    assert await ledger.service.store.breaches("review-sync") == []


async def test_a_retried_batch_counts_once_and_a_bad_one_loses_nothing(ledger: Ledger) -> None:
    run_id = (await ledger.post("/runs", open_body(5))).json()["id"]
    batch = {
        "batch_id": "b1",
        "keys": [
            {"key": "t1", "outcome": "written"},
            {"key": "t2", "outcome": "no_match", "reason": "no_document"},
        ],
    }
    first = await ledger.post(f"/runs/{run_id}/batches", batch)
    again = await ledger.post(f"/runs/{run_id}/batches", batch)
    assert (first.status_code, again.status_code) == (200, 200)
    assert (first.json()["duplicate"], again.json()["duplicate"]) == (False, True)
    assert again.json()["outcomes"] == {"written": 1, "no_match": 1, "skipped": 0, "failed": 0}
    changed = dict(batch, keys=[{"key": "t3", "outcome": "written"}])
    conflict = await ledger.post(f"/runs/{run_id}/batches", changed)
    assert conflict.status_code == 409 and "b1" in conflict.json()["detail"]
    bad = {
        "batch_id": "b2",
        "keys": [{"key": "t3", "outcome": "written"}, {"key": "t4", "outcome": "skipped"}],
    }
    rejected = await ledger.post(f"/runs/{run_id}/batches", bad)
    assert rejected.status_code == 422
    assert [e["loc"] for e in rejected.json()["detail"]] == [["body", "keys", 1, "reason"]]
    run = (await ledger.http.get(f"/api/v1/ledger/runs/{run_id}")).json()
    assert run["outcomes"]["written"] == 1 and run["batches"] == 1
    bad["keys"][1]["reason"] = "deleted_upstream"  # type: ignore[index]
    assert (await ledger.post(f"/runs/{run_id}/batches", bad)).json()["duplicate"] is False
    closed = await ledger.post(f"/runs/{run_id}/close", {"status": "success"})
    assert closed.json()["outcomes"] == {"written": 2, "no_match": 1, "skipped": 1, "failed": 0}


async def test_protocol_errors_name_the_problem(ledger: Ledger) -> None:
    unknown = await ledger.post("/runs", open_body(job="nightly"))
    assert unknown.status_code == 422
    assert unknown.json()["detail"][0]["loc"] == ["body", "job"]
    assert "unknown job 'nightly'" in unknown.json()["detail"][0]["msg"]
    assert (await ledger.post("/runs", open_body(), token=None)).status_code == 401
    assert (await ledger.post("/runs/999999/close", {"status": "success"})).status_code == 404
    body = open_body(client_run_id="job-run-1")
    first, retry = await ledger.post("/runs", body), await ledger.post("/runs", body)
    assert (first.status_code, retry.status_code) == (201, 200)
    assert first.json()["id"] == retry.json()["id"]
    reused = await ledger.post("/runs", dict(body, input_rows=11))
    assert reused.status_code == 409 and "client_run_id" in reused.json()["detail"]
    run_id = first.json()["id"]
    summary = {"status": "failed", "counts": {"written": 0}}
    assert (await ledger.post(f"/runs/{run_id}/close", summary)).status_code == 200
    assert (await ledger.post(f"/runs/{run_id}/close", summary)).status_code == 200
    other = await ledger.post(f"/runs/{run_id}/close", {"status": "success"})
    assert other.status_code == 409
    late = await ledger.post(
        f"/runs/{run_id}/batches",
        {"batch_id": "late", "counts": [{"outcome": "written", "count": 1}]},
    )
    assert late.status_code == 409 and "closed" in late.json()["detail"]


async def test_a_crashed_job_leaves_an_open_run_that_breaches_missing_summary(
    ledger: Ledger,
) -> None:
    with pytest.raises(RuntimeError, match="killed"):
        async with ledger.client(input_rows=635) as run:
            await run.count("written", 168)
            raise RuntimeError("killed by the runtime after 900 s")
    stored = await ledger.service.store.run(run.run_id or 0)
    assert stored.closed_at is None and stored.outcomes.written == 168
    # Before the deadline (06:00 the next day) nothing is due yet.
    assert "missing_summary" not in await ledger.service.evaluate_window(
        ledger.service.jobs["review-sync"], DAY.date(), DAY + timedelta(days=1, hours=5)
    )
    await ledger.service.evaluate_all(DAY + timedelta(days=1, hours=7))
    v = await ledger.scrape()
    labels = {**JOB, "rule": "missing_summary"}
    assert v("driftgauge_ledger_breach", labels) == 1
    assert v("driftgauge_ledger_breaches_total", labels) == 1
    listed = (
        await ledger.http.get(
            "/api/v1/ledger/breaches", params={"job": "review-sync", "active": True}
        )
    ).json()
    assert [(b["rule"], b["window_day"]) for b in listed] == [("missing_summary", "2024-05-06")]
    # Evaluating again does not record the same breach twice.
    await ledger.service.evaluate_all(DAY + timedelta(days=1, hours=8))
    assert (await ledger.scrape())("driftgauge_ledger_breaches_total", labels) == 1


async def test_a_job_that_never_reports_breaches_missing_summary(ledger: Ledger) -> None:
    # The ledger first watches the job on DAY + 1h: DAY's window ends after that.
    await ledger.service.evaluate_all(DAY + timedelta(hours=1))
    latest = await ledger.service.evaluate_all(DAY + timedelta(days=3, hours=7))
    assert latest == {"review-sync": (DAY + timedelta(days=2)).date()}
    windows = (await ledger.http.get("/api/v1/ledger/windows")).json()
    assert windows[0]["breaches"] == ["missing_summary"] and windows[0]["due"] is True
    v = await ledger.scrape()
    assert v("driftgauge_ledger_breach", {**JOB, "rule": "missing_summary"}) == 1
    assert v("driftgauge_ledger_last_closed_run_timestamp_seconds", JOB) is None


async def report_window(ledger: Ledger, day: datetime) -> None:
    """Report one healthy run of review-sync for the window starting `day`."""
    ledger.clock.now = day + timedelta(days=1, hours=2)
    async with ledger.client(window_start=day, window_end=day + timedelta(days=1)) as run:
        await run.written([f"t{i}" for i in range(10)])


async def test_a_window_before_the_first_watch_never_breaches(ledger: Ledger) -> None:
    # Started at noon: the window before (ended at midnight, due at 06:00) was the job's to
    # report before the ledger existed. Hourly judgements over a healthy week stay clean.
    started = DAY + timedelta(hours=12)
    await ledger.service.evaluate_all(started)
    open_windows = []
    for hour in range(1, 7 * 24):
        now = started + timedelta(hours=hour)
        if now.hour == 2:
            await report_window(ledger, now - timedelta(days=1, hours=2))
        await ledger.service.evaluate_all(now)
        v = await ledger.scrape()
        open_windows.append(
            v("driftgauge_ledger_breach_windows", {**JOB, "rule": "missing_summary"})
        )
    assert set(open_windows) == {0}
    assert await ledger.service.store.breaches("review-sync") == []
    judged = {w["window_day"] for w in (await ledger.http.get("/api/v1/ledger/windows")).json()}
    assert "2024-05-05" in judged  # judged, and clean: not left unjudged
    # The job then stops: its first silent window breaches at its deadline.
    await ledger.service.evaluate_all(started + timedelta(days=8))
    assert [b.window_day.isoformat() for b in await ledger.service.store.breaches(None)] == [
        "2024-05-13"
    ]


async def test_the_first_watch_is_shared_and_kept(ledger: Ledger) -> None:
    await ledger.service.evaluate_all(DAY + timedelta(hours=12))
    # Another replica (or a restart) a day later keeps the first watch: the silent window
    # since then breaches.
    other = LedgerService(ledger.service.store, ledger.config.checks, clock=ledger.clock)
    await other.evaluate_all(DAY + timedelta(days=1, hours=7))
    assert [b.window_day for b in await other.store.breaches(None)] == [DAY.date()]


async def test_a_breach_is_acknowledged_with_who_and_why(ledger: Ledger) -> None:
    await ledger.service.evaluate_all(DAY + timedelta(hours=1))
    await ledger.service.evaluate_all(DAY + timedelta(days=1, hours=7))
    labels = {**JOB, "rule": "missing_summary"}
    assert (await ledger.scrape())("driftgauge_ledger_breach_windows", labels) == 1
    path = "/breaches/review-sync/2024-05-06/missing_summary/acknowledge"
    ack = {"by": "oncall@example.com", "reason": "job paused for the migration (OPS-12)"}
    assert (await ledger.post(path, ack, token=None)).status_code == 401
    got = await ledger.post(path, ack)
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["active"] is False
    assert body["acknowledged"]["by"] == ack["by"]
    assert body["acknowledged"]["reason"] == ack["reason"]
    assert (await ledger.post(path, ack)).status_code == 200  # the same again: no change
    other = await ledger.post(path, {"by": "someone-else", "reason": "other"})
    assert other.status_code == 409 and "oncall@example.com" in other.json()["detail"]
    # Judged again, the window still has no run: the acknowledgement holds.
    await ledger.service.evaluate_all(DAY + timedelta(days=1, hours=8))
    await ledger.service.evaluate_window(
        ledger.service.jobs["review-sync"], DAY.date(), DAY + timedelta(days=1, hours=9)
    )
    v = await ledger.scrape()
    assert v("driftgauge_ledger_breach_windows", labels) == 0
    assert v("driftgauge_ledger_breach", labels) == 0
    assert v("driftgauge_ledger_breaches_total", labels) == 1  # recorded, never forgotten
    listed = (await ledger.http.get("/api/v1/ledger/breaches")).json()
    assert [b["acknowledged"]["by"] for b in listed] == [ack["by"]]
    missing = await ledger.post(path.replace("2024-05-06", "2024-05-01"), ack)
    assert missing.status_code == 404 and "2024-05-01" in missing.json()["detail"]
    blank = await ledger.post(path, {"by": " ", "reason": "x"})
    assert blank.status_code == 422 and blank.json()["detail"][0]["loc"] == ["body", "by"]
    bad_rule = await ledger.post(path.replace("missing_summary", "nope"), ack)
    assert bad_rule.status_code == 422


SCENARIOS: dict[str, tuple[int, list[dict[str, Any]], dict[str, Any], set[str]]] = {
    # rule → (input rows, batch counts, summary, every rule the window then breaches)
    "failed_writes": (
        10,
        [
            {"outcome": "written", "count": 9},
            {"outcome": "failed", "error": "TransportError", "count": 1},
        ],
        {"status": "partial_failure"},
        {"failed_writes"},
    ),
    "nothing_written": (
        10,
        [{"outcome": "skipped", "reason": "no_join_key", "count": 10}],
        {"status": "failed"},
        {"nothing_written"},
    ),
    "no_match_rate": (
        100,
        [
            {"outcome": "written", "count": 94},
            {"outcome": "no_match", "reason": "no_document", "count": 6},
        ],
        {"status": "success"},
        {"no_match_rate"},
    ),
    "outcomes_mismatch": (
        10,
        [{"outcome": "written", "count": 7}],
        {"status": "success"},
        {"outcomes_mismatch"},
    ),
    "status_mismatch": (
        10,
        [
            {"outcome": "written", "count": 9},
            {"outcome": "failed", "error": "Conflict", "count": 1},
        ],
        {"status": "success"},
        {"failed_writes", "status_mismatch"},
    ),
    # A double append: 1,628 written for 1,028 handed.
    "written_exceeds_handed": (
        1028,
        [{"outcome": "written", "count": 1028}, {"outcome": "written", "count": 600}],
        {"status": "success"},
        {"written_exceeds_handed", "outcomes_mismatch"},
    ),
}


@pytest.mark.parametrize("rule", sorted(SCENARIOS))
async def test_each_rule_fires_on_a_crafted_run(ledger: Ledger, rule: str) -> None:
    input_rows, counts, summary, expected = SCENARIOS[rule]
    run_id = (await ledger.post("/runs", open_body(input_rows))).json()["id"]
    await ledger.post(f"/runs/{run_id}/batches", {"batch_id": "b", "counts": counts})
    await ledger.post(f"/runs/{run_id}/close", summary)
    v = await ledger.scrape()
    fired = {r for r in RULES if v("driftgauge_ledger_breach", {**JOB, "rule": r}) == 1}
    assert rule in fired and fired == expected
    assert v("driftgauge_ledger_breaches_total", {**JOB, "rule": rule}) == 1


async def test_no_match_rate_counts_lookups_not_rows_skipped_for_no_join_key(
    ledger: Ledger,
) -> None:
    # A partial key rename: 40 of 625 lookups (6.4%) match nothing; 375 rows had no key.
    counts = [
        {"outcome": "written", "count": 585},
        {"outcome": "no_match", "reason": "no_document", "count": 40},
        {"outcome": "skipped", "reason": "no_join_key", "count": 375},
    ]
    run_id = (await ledger.post("/runs", open_body(1000))).json()["id"]
    await ledger.post(f"/runs/{run_id}/batches", {"batch_id": "b", "counts": counts})
    await ledger.post(f"/runs/{run_id}/close", {"status": "success"})
    v = await ledger.scrape()
    assert v("driftgauge_ledger_breach", {**JOB, "rule": "no_match_rate"}) == 1
    (breach,) = await ledger.service.store.breaches("review-sync")
    assert breach.detail.startswith("40 of 625 looked-up rows")


async def test_three_runs_of_one_window_are_duplicate_summaries(ledger: Ledger) -> None:
    for _ in range(3):
        async with ledger.client(input_rows=2) as run:
            await run.written(["t1", "t2"])
    v = await ledger.scrape()
    assert v("driftgauge_ledger_breach", {**JOB, "rule": "duplicate_summary"}) == 1
    assert v("driftgauge_ledger_runs_total", {**JOB, "status": "success"}) == 3
    breach = (await ledger.service.store.breaches("review-sync"))[0]
    assert breach.rule == "duplicate_summary" and breach.detail.startswith("3 summaries")


async def test_ledger_exclusions_take_each_keys_latest_report(ledger: Ledger) -> None:
    async with ledger.client(input_rows=4) as run:
        await run.no_match({"t1": "no_document", "t2": "no_document"})
        await run.skipped({"t3": "no_join_key"})
        await run.written(["t4"])
    async with ledger.client(input_rows=1) as retry:
        await retry.failed({"t2": "TransportError"})
    async with ledger.client(
        input_rows=1, window_start=DAY + timedelta(days=3), window_end=DAY + timedelta(days=4)
    ) as later:
        await later.no_match({"t9": "no_document"})
    check = ledger.config.checks["reviews"]
    got = await ledger_exclusions(ledger.service.store, check, DAY, DAY + timedelta(days=1))
    assert got == {"t1": "no_document", "t3": "no_join_key"}
    keys = await ledger.http.get(
        f"/api/v1/ledger/runs/{run.run_id}/keys", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert sorted(k["key"] for k in keys.json()) == ["t1", "t2", "t3"]
    assert (await ledger.http.get(f"/api/v1/ledger/runs/{run.run_id}/keys")).status_code == 401


# A sync pipeline end to end: PostgreSQL tasks → the job → an OpenSearch index, with the
# job reporting every row to the ledger, then the engine reconciling through the reader view.
PIPE_DAYS = 3
PIPE_ROWS = 300
NO_DOCUMENT = (45, 145, 245)
"""1% of each day's tasks point at a conversation nobody indexed (the job says no_match)."""
RENAMED = (50, 60, 70, 80, 90, 150, 160, 170, 180)
"""3% of the last day's tasks: upstream changed their conversation keys' format."""


@dataclass(frozen=True)
class Task:
    task_id: str
    label: str
    conversation_key: str | None
    completed_at: datetime


def pipeline_tasks() -> list[Task]:
    out = []
    for d in range(PIPE_DAYS):
        for i in range(PIPE_ROWS):
            key: str | None = None if i % 100 < 39 else f"conv-{d}-{i}"  # 39% unjoinable
            if key is not None and d == PIPE_DAYS - 1 and i in RENAMED:
                key = f"CONV_{d}_{i}"
            out.append(
                Task(
                    f"d{d}-{i:03d}",
                    "first_tier" if i % 4 else "second_tier",
                    key,
                    DAY + timedelta(days=d, minutes=4 * i),
                )
            )
    return out


def pipeline_check(dsn: str, index: str) -> Config:
    raw = reviews_raw(
        dsn,
        index,
        table="pipe_tasks",
        timeout=30,
        reader={"fields": {"label": "review_tier"}, "filter": TIERS_NOT_CANARY},
        exclusions=[{"reason": "no_join_key", "where": "conversation_key IS NULL"}],
        settle="2h",
        # Zero tolerance: every missing row must be excused by a reason. The ledger's
        # no_document share is alarmed on its own.
        tolerance={
            "missing_ratio": 0,
            "extra": 0,
            "mismatched": 0,
            "exclusion_rate": {"no_document": 0.02},
        },
        ledger={"job": "review-sync"},
    )
    return load_text(yaml.safe_dump(raw))


async def sync_day(
    d: int,
    rows: list[Task],
    known: set[str],
    os_client: AsyncOpenSearch,
    index: str,
    ledger: Ledger,
) -> None:
    """Run the sync job for one day: write what it can, report every row to the ledger."""
    day_rows = [t for t in rows if t.task_id.startswith(f"d{d}-")]
    start = DAY + timedelta(days=d)
    docs = []
    async with ledger.client(
        window_start=start, window_end=start + timedelta(days=1), input_rows=len(day_rows)
    ) as run:
        for t in day_rows:
            if t.conversation_key is None:
                await run.skipped({t.task_id: "no_join_key"})
            elif t.conversation_key in known:
                docs.append(
                    {
                        "_index": index,
                        "_id": t.task_id,
                        "_source": {
                            "task_id": t.task_id,
                            "review_tier": t.label,
                            "completed_at": t.completed_at.isoformat(),
                        },
                    }
                )
                await run.written([t.task_id])
            else:
                await run.no_match({t.task_id: "no_document"})
        await async_bulk(os_client, docs, refresh=True)


async def test_a_healthy_pipeline_is_exact_and_a_key_rename_pages_on_its_first_run(
    pg_database: str, os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> None:
    rows = pipeline_tasks()
    conn = await asyncpg.connect(pg_database, timeout=30)
    try:
        await conn.execute(
            "CREATE TABLE pipe_tasks (task_id text, label text,"
            " conversation_key text, completed_at timestamptz)"
        )
        await conn.copy_records_to_table(
            "pipe_tasks",
            records=[(t.task_id, t.label, t.conversation_key, t.completed_at) for t in rows],
        )
    finally:
        await conn.close()
    index = os_index("dg_pipeline")
    await create_index(
        os_client,
        index,
        {"task_id": "keyword", "review_tier": "keyword", "completed_at": "date"},
        shards=1,
        replicas=0,
    )
    # The conversations that exist in the index, under the old key format.
    known = {
        f"conv-{d}-{i}"
        for d in range(PIPE_DAYS)
        for i in range(PIPE_ROWS)
        if i % 100 >= 39 and i not in NO_DOCUMENT
    }
    config = pipeline_check(pg_database, index)
    check = config.checks["reviews"]
    start, end = DAY, DAY + timedelta(days=PIPE_DAYS)
    now = end + timedelta(hours=3)
    async with open_ledger(pg_database, config) as ledger:
        for d in range(PIPE_DAYS):
            await sync_day(d, rows, known, os_client, index, ledger)
        excused = await ledger_exclusions(ledger.service.store, check, start, end)
        # The ledger pages on the rename too: 12 of the 183 lookups (6.6%) found no
        # document, while healthy days stay at 3 of 183 (1.6%); the 117 rows skipped
        # for having no join key never looked anything up.
        found = await ledger.service.store.breaches("review-sync")
        assert [(b.window_day, b.rule) for b in found] == [
            ((DAY + timedelta(days=2)).date(), "no_match_rate")
        ]
        assert found[0].detail.startswith("12 of 183 looked-up rows")
    source, reader = await open_adapter(check.source), await open_adapter(check.reader)
    try:
        with_ledger = await reconcile(
            check, source, reader, start, end, now=now, ledger_excluded=excused
        )
        without = await reconcile(check, source, reader, start, end, now=now)
    finally:
        await source.close()
        await reader.close()
    healthy, renamed = with_ledger.buckets[:2], with_ledger.buckets[2]
    for b in healthy:
        assert (b.status, b.missing, b.extra, b.mismatched) == ("ok", 0, 0, 0)
        assert b.excluded == {"no_join_key": 117, "no_document": 3}
        assert b.expected == PIPE_ROWS and b.visible == PIPE_ROWS - 120
    # Without the job's reasons the same healthy days drift at zero tolerance.
    assert [b.missing for b in without.buckets[:2]] == [3, 3]
    assert {b.status for b in without.buckets[:2]} == {"drift"}
    # The rename: every renamed key is "no document" to the job, and the rate pages.
    assert renamed.status == "drift" and renamed.missing == 0
    assert renamed.excluded["no_document"] == 3 + len(RENAMED)
    assert renamed.reasons == ["excluded[no_document] 12 of 300 (4.00% > 2.00%)"]


async def test_the_audit_wires_ledger_reconcile_and_metrics_together(pg_database: str) -> None:
    async with migrated_schema(pg_database) as schema:
        raw = yaml.safe_load(CONFIG)
        raw["state"] = {"dsn": pg_database, "schema": schema}
        config = load_text(yaml.safe_dump(raw))
        clock = Clock(DAY + timedelta(days=1, hours=1))
        reconciled: list[tuple[str, datetime, datetime]] = []

        async def reconcile_now(check: str, start: datetime, end: datetime) -> None:
            reconciled.append((check, start, end))

        async def no_source(check: Any) -> Any:
            raise AssertionError("no canary or volume is configured")

        async with open_audit(
            config, reconcile=reconcile_now, source=no_source, clock=clock
        ) as audit:
            app = FastAPI()
            app.include_router(audit_router(TokenCheck([TOKEN.encode()], True)), prefix="/api/v1")
            app.state.audit = audit
            transport = httpx.ASGITransport(app=app)
            async with LedgerClient(
                "http://dg",
                token=TOKEN,
                transport=transport,
                job="review-sync",
                window_start=DAY,
                window_end=DAY + timedelta(days=1),
                input_rows=1,
            ) as run:
                await run.written(["t1"])
            (pending,) = audit.reconcile_on_close.pending
            assert pending.run_at == clock.now + timedelta(minutes=15)
            await audit.reconcile_on_close.run_due(pending.run_at)
            assert reconciled == [("reviews", DAY, DAY + timedelta(days=1))]
            # A day later nothing reported the next window: the loop's tick judges it.
            await audit.tick(DAY + timedelta(days=2, hours=7))
            v = registry_of(*audit.parts).get_sample_value
            assert v("driftgauge_ledger_breach", {**JOB, "rule": "missing_summary"}) == 1
            assert v("driftgauge_ledger_runs_total", {**JOB, "status": "success"}) == 1


async def test_a_run_in_progress_does_not_hide_the_previous_windows_breach(ledger: Ledger) -> None:
    await ledger.service.evaluate_all(DAY + timedelta(hours=1))  # watched from here
    await ledger.service.evaluate_all(DAY + timedelta(days=1, hours=7))
    assert (await ledger.scrape())(
        "driftgauge_ledger_breach", {**JOB, "rule": "missing_summary"}
    ) == 1
    # The next night's run opens for the next day and is still writing.
    async with ledger.client(
        window_start=DAY + timedelta(days=1), window_end=DAY + timedelta(days=2), input_rows=3
    ) as run:
        await run.written(["t1"])
        await run.flush()
        await ledger.service.evaluate_all(DAY + timedelta(days=2, hours=1))
        assert (await ledger.scrape())(
            "driftgauge_ledger_breach", {**JOB, "rule": "missing_summary"}
        ) == 1
        await run.written(["t2", "t3"])
    # Once it closes, its own (clean) window is the latest; the window before it still
    # has no summary, so its breach stays exported.
    v = await ledger.scrape()
    assert v("driftgauge_ledger_breach", {**JOB, "rule": "missing_summary"}) == 1
    assert v("driftgauge_ledger_breach_windows", {**JOB, "rule": "missing_summary"}) == 1


async def test_breaches_of_older_windows_stay_exported_until_judged_again(ledger: Ledger) -> None:
    def day(i: int) -> datetime:
        return DAY + timedelta(days=i)

    async def report(i: int, counts: list[dict[str, Any]], rows: int = 10) -> None:
        body = open_body(rows, window_start=day(i).isoformat(), window_end=day(i + 1).isoformat())
        run_id = (await ledger.post("/runs", body)).json()["id"]
        await ledger.post(f"/runs/{run_id}/batches", {"batch_id": "b", "counts": counts})
        done = sum(c["count"] for c in counts if c["outcome"] == "written")
        failed = any(c["outcome"] == "failed" for c in counts)
        status = "partial_failure" if failed else "success" if done else "failed"
        await ledger.post(f"/runs/{run_id}/close", {"status": status})

    clean = [{"outcome": "written", "count": 10}]
    await report(0, clean)
    await report(0, clean)  # duplicate_summary
    ledger.clock.now = day(2) + timedelta(hours=1)
    await report(
        1,
        [
            {"outcome": "written", "count": 9},
            {"outcome": "failed", "error": "TransportError", "count": 1},
        ],
    )
    # Nothing reports window 2; after its deadline it breaches missing_summary.
    await ledger.service.evaluate_all(day(3) + timedelta(hours=7))
    ledger.clock.now = day(4) + timedelta(hours=1)
    await report(
        3,
        [
            {"outcome": "written", "count": 90},
            {"outcome": "no_match", "reason": "no_document", "count": 10},
        ],
        rows=100,
    )
    ledger.clock.now = day(5) + timedelta(hours=1)
    await report(4, clean)  # the latest window is clean
    v = await ledger.scrape()
    opened = {"duplicate_summary": 0, "failed_writes": 1, "missing_summary": 2, "no_match_rate": 3}
    for rule in RULES:
        labels = {**JOB, "rule": rule}
        assert v("driftgauge_ledger_breach", labels) == (rule in opened), rule
        assert v("driftgauge_ledger_breach_windows", labels) == (rule in opened), rule
        oldest = v("driftgauge_ledger_oldest_breach_window_timestamp_seconds", labels)
        assert oldest == (day(opened[rule]).timestamp() if rule in opened else None), rule
    # Window 2's summary arrives late: judged again, it holds, and only its breach clears.
    ledger.clock.now = day(6)
    await report(2, clean)
    v = await ledger.scrape()
    assert v("driftgauge_ledger_breach", {**JOB, "rule": "missing_summary"}) == 0
    assert v("driftgauge_ledger_breach_windows", {**JOB, "rule": "missing_summary"}) == 0
    # Weeks later, past the lookback, the unresolved ones are still open and still exported.
    await ledger.service.evaluate_all(day(30) + timedelta(hours=7))
    v = await ledger.scrape()
    still = {r for r in RULES if v("driftgauge_ledger_breach", {**JOB, "rule": r}) == 1}
    # (The job stopped reporting, so yesterday's window is missing its summary too.)
    assert still == {"duplicate_summary", "failed_writes", "no_match_rate", "missing_summary"}
    assert (
        v(
            "driftgauge_ledger_oldest_breach_window_timestamp_seconds",
            {**JOB, "rule": "duplicate_summary"},
        )
        == day(0).timestamp()
    )
    assert (
        v(
            "driftgauge_ledger_oldest_breach_window_timestamp_seconds",
            {**JOB, "rule": "missing_summary"},
        )
        == day(29).timestamp()
    )
    listed = (
        await ledger.http.get(
            "/api/v1/ledger/breaches", params={"job": "review-sync", "active": True}
        )
    ).json()
    assert sorted((b["rule"], b["window_day"]) for b in listed) == [
        ("duplicate_summary", "2024-05-06"),
        ("failed_writes", "2024-05-07"),
        ("missing_summary", "2024-06-04"),
        ("no_match_rate", "2024-05-09"),
    ]
