"""Every panel of the Grafana dashboard returns data from a real Prometheus scraping serve.

`driftgauge serve` runs against a real PostgreSQL source and a real OpenSearch reader with
planted drift and exclusions; the check has a canary, vocabulary and volume settings, and its
sync job has closed a run that breaches a ledger rule. A real Prometheus scrapes the service
every second; each panel's PromQL, variables filled in, must then return a non-empty result.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

# tests/deploy is no package; mypy reads it under its own names (see pyproject.toml).
from tests.deploy.dashboard_queries import panel_queries  # type: ignore[import-not-found, import-untyped, unused-ignore]
from tests.e2e.prometheus import needs_prometheus, start_prometheus, write_scrape_config
from tests.e2e.support import (
    OS_URL,
    Samples,
    as_doc,
    day_window,
    dump_log,
    free_port,
    load_tasks,
    past_days,
    per_day,
    sample,
    scrape,
    scratch_database,
    scratch_index,
    serve_config,
    serving,
    stop,
    task_mapping,
    until,
    write_config,
)

pytestmark = [pytest.mark.e2e, needs_prometheus]

TOKEN = "e2e-dash-" + uuid.uuid4().hex
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHECK = "reviews"
JOB = "review-sync"
DAYS = 3
ROWS_PER_DAY = 30
SCRAPES = 5
"""Scrapes Prometheus must hold before the panels are queried (rate windows need two)."""
MAPPING = task_mapping("task_id", "review_tier", "conversation_key", "driftgauge_canary")

CONFIG = serve_config(
    "driftgauge_dashboard_e2e",
    """  reviews:
    source: {store: pg, table: tasks, key: task_id, time: completed_at}
    reader:
      store: os
      index: <INDEX>
      key: task_id
      time: completed_at
      fields: {label: review_tier}
      filter:
        bool:
          filter: [{terms: {review_tier: [first_tier, second_tier]}}]
          must_not: [{exists: {field: driftgauge_canary}}]
    fields: {label: string}
    exclusions: [{reason: no_join_key, where: conversation_key IS NULL}]
    settle: 1m
    tolerance: {exclusion_rate: {no_join_key: 0.5}}
    drilldown: {leaf_rows: 20}
    # Full history reaches two days before the recent window: the old-drift panel's days.
    schedule: {recent: {every: 2s, days: 4}, full: {every: 7d, days: 6}}
    # A summary deadline of a minute: the latest window past it is yesterday, the one
    # the test reports, at any hour (with the default 6h, until 06:00 UTC it was the
    # day before, which no run reports: missing_summary).
    ledger: {job: review-sync, no_match_rate: 0.01, settle: 1h, summary_deadline: 1m}
    canary: {store: os_sync, document: {review_tier: first_tier}, every: 1h,
             timeout_seconds: 20}
    vocabulary: {label: {}}
    # Three days of rows: two before yesterday are history enough for the volume panel.
    volume: {trailing: 7, sigmas: 3, min_history: 2}
""",
    stores=['os_sync: {kind: opensearch, url: "<OS>", timeout_seconds: 10}'],
)


@dataclass
class Live:
    """The running service, where Prometheus should scrape it, and its log."""

    url: str
    port: int
    log: Path
    days: list[date]


def make_rows(days: list[date]) -> list[dict[str, Any]]:
    """Return the source rows: every tenth row (from the 8th) has no join key."""

    def row(day: date, start: datetime, i: int) -> dict[str, Any]:
        return {
            "task_id": f"d{day:%m%d}-{i:03d}",
            "review_tier": "first_tier",
            "conversation_key": None if i % 10 == 7 else f"conv-{day:%m%d}-{i}",
            "completed_at": start + timedelta(minutes=40 * i, seconds=11),
        }

    return per_day(days, ROWS_PER_DAY, row)


async def load_reader(client: AsyncOpenSearch, index: str, rows: list[dict[str, Any]]) -> None:
    """Index what the sync job would write, then lose one, alter one and add one per day."""
    await client.indices.create(
        index=index,
        body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}, "mappings": MAPPING},
    )
    synced = [r for r in rows if r["conversation_key"] is not None]
    by_day: dict[date, list[dict[str, Any]]] = {}
    for r in synced:
        by_day.setdefault(r["completed_at"].date(), []).append(r)
    docs = []
    for day, rs in by_day.items():
        for n, r in enumerate(rs):
            if n == 3:
                continue  # missing
            doc = as_doc(r)
            if n == 9:
                doc["review_tier"] = "second_tier"  # mismatched, still passes the filter
            docs.append({"_index": index, "_id": r["task_id"], "_source": doc})
        extra = {**as_doc(rs[0]), "task_id": f"x{day:%m%d}"}
        docs.append({"_index": index, "_id": extra["task_id"], "_source": extra})
    await async_bulk(client, docs, refresh="wait_for")


async def load_both(
    client: AsyncOpenSearch, index: str, dsn: str, rows: list[dict[str, Any]]
) -> None:
    """Fill the source table from `rows` and the reader index with the planted drift."""
    await load_tasks(
        dsn,
        [(r["task_id"], r["review_tier"], r["conversation_key"], r["completed_at"]) for r in rows],
        ("task_id", "label", "conversation_key", "completed_at"),
    )
    await load_reader(client, index, rows)


@pytest.fixture(scope="module")
async def live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    tmp = tmp_path_factory.mktemp("dashboard_live")
    days = past_days(DAYS)
    rows = make_rows(days)
    log = tmp / "serve.log"
    async with (
        scratch_index("dg_e2e_dash") as (client, index),
        scratch_database("dg_e2e_dash") as dsn,
    ):
        await load_both(client, index, dsn, rows)
        config = write_config(tmp, CONFIG, DSN=dsn, OS=OS_URL, TOKEN=TOKEN, INDEX=index)
        async with serving(config, log) as served:
            yield Live(served.url, served.port, log, days)


async def run_the_full_pass(http: httpx.AsyncClient) -> None:
    """Start a full-history run, waiting out the recent runs that hold the check."""

    async def started() -> bool:
        resp = await http.post(
            f"/api/v1/checks/{CHECK}/runs", params={"window": "full"}, headers=AUTH
        )
        assert resp.status_code in (202, 409), resp.text
        return resp.status_code == 202

    await until("a full-history run to start", started, limit=30)


async def feed_the_audit(http: httpx.AsyncClient, live: Live) -> None:
    """Run the canary and report one sync-job run that matches too few documents."""
    await run_the_full_pass(http)
    canary = await http.post(f"/api/v1/canary/{CHECK}", headers=AUTH)
    assert canary.status_code == 200, canary.text
    assert canary.json()["result"] == "ok", canary.json()["detail"]

    opened = await http.post(
        "/api/v1/ledger/runs",
        headers=AUTH,
        json={"job": JOB, **day_window(live.days[-1]), "input_rows": ROWS_PER_DAY},
    )
    assert opened.status_code == 201, opened.text
    run_id = opened.json()["id"]
    counts = {"written": ROWS_PER_DAY - 4, "no_match": 1, "skipped": 3}
    batch = await http.post(
        f"/api/v1/ledger/runs/{run_id}/batches",
        headers=AUTH,
        json={
            "batch_id": "all",
            "counts": [
                {"outcome": "written", "count": counts["written"]},
                {"outcome": "no_match", "reason": "no_document", "count": counts["no_match"]},
                {"outcome": "skipped", "reason": "no_join_key", "count": counts["skipped"]},
            ],
        },
    )
    assert batch.status_code == 200, batch.text
    closed = await http.post(
        f"/api/v1/ledger/runs/{run_id}/close",
        headers=AUTH,
        json={"status": "success", "counts": counts},
    )
    assert closed.status_code == 200, closed.text
    # 1 of 30 rows matched no document: over the job's 1% no_match_rate.
    breaches = (await http.get("/api/v1/ledger/breaches", params={"job": JOB})).json()
    assert [b["rule"] for b in breaches if b["active"]] == ["no_match_rate"]


def audit_series_present(s: Samples, live: Live) -> bool:
    """Return True once /metrics carries the reconciliation and every audit family."""
    yesterday = live.days[-1].isoformat()
    return (
        all(
            v is not None
            for v in (
                sample(s, "driftgauge_bucket_rows", check=CHECK, day=yesterday, kind="missing"),
                sample(s, "driftgauge_canary_up", check=CHECK),
                sample(s, "driftgauge_vocabulary_unmatched_rows", check=CHECK, field="label"),
                sample(s, "driftgauge_volume_anomaly", check=CHECK, day=yesterday),
                sample(s, "driftgauge_ledger_last_closed_run_timestamp_seconds", sync_job=JOB),
                sample(s, "driftgauge_history_buckets_in_drift", check=CHECK, direction="missing"),
            )
        )
        and sample(s, "driftgauge_ledger_breach", sync_job=JOB, rule="no_match_rate") == 1
    )


def start_scraping(tmp: Path, target_port: int, port: int) -> subprocess.Popen[bytes]:
    """Start Prometheus scraping the service every second into a scratch TSDB."""
    job = {
        "job_name": "driftgauge",
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}],
    }
    return start_prometheus(tmp, write_scrape_config(tmp, job), port)


async def instant(http: httpx.AsyncClient, expr: str) -> dict[str, Any]:
    """Run an instant query and return Prometheus' answer (status, data or error)."""
    resp = await http.get("/api/v1/query", params={"query": expr})
    if not resp.headers.get("content-type", "").startswith("application/json"):
        return {"status": "unavailable", "error": f"HTTP {resp.status_code}: {resp.text[:200]}"}
    answer: dict[str, Any] = resp.json()
    return answer


async def test_every_dashboard_panel_has_data(live: Live, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        await feed_the_audit(http, live)

        async def fed() -> Samples | None:
            s = await scrape(http, live.url)
            return s if audit_series_present(s, live) else None

        s = await until("the scheduled run and the audit series on /metrics", fed, limit=40)
        exposition = (await http.get(f"{live.url}/metrics")).text
    yesterday = live.days[-1].isoformat()
    assert sample(s, "driftgauge_bucket_rows", check=CHECK, day=yesterday, kind="missing") == 1
    # Every part is populated now: promtool's linter must accept every name the serve uses.
    lint = await asyncio.create_subprocess_exec(
        "promtool",
        "check",
        "metrics",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(lint.communicate(exposition.encode()), 60)
    assert lint.returncode == 0 and not out.strip(), out.decode()
    assert (
        sample(
            s, "driftgauge_bucket_excluded_rows", check=CHECK, day=yesterday, reason="no_join_key"
        )
        == 3
    )

    port = free_port()
    prometheus = start_scraping(tmp_path, live.port, port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as prom:

            async def scraped() -> bool:
                if prometheus.poll() is not None:
                    raise AssertionError(
                        "prometheus exited:\n" + dump_log(tmp_path / "prometheus.log")
                    )
                try:
                    # Prometheus answers 503 "Service Unavailable" until its TSDB is open.
                    if (await prom.get("/-/ready")).status_code != 200:
                        return False
                    got = await instant(prom, 'count_over_time(up{job="driftgauge"}[1m])')
                except httpx.TransportError:
                    return False
                result = got.get("data", {}).get("result", [])
                return bool(result) and float(result[0]["value"][1]) >= SCRAPES

            await until(f"{SCRAPES} scrapes by Prometheus", scraped, limit=40)
            up = await instant(prom, 'up{job="driftgauge"}')
            assert [r["value"][1] for r in up["data"]["result"]] == ["1"]

            queries = panel_queries(
                check=CHECK, rate_interval="1m", range_="5m", extra={"__interval": "15s"}
            )
            assert queries, "the dashboard has no PromQL targets"
            failed = []
            for q in queries:
                got = await instant(prom, q.expr)
                if got.get("status") != "success":
                    failed.append(
                        f"{q.panel_title!r} [{q.ref_id}]: {got.get('error')}\n    {q.expr}"
                    )
                elif not got["data"]["result"]:
                    failed.append(f"{q.panel_title!r} [{q.ref_id}]: no data\n    {q.expr}")
            assert not failed, "panels without data:\n" + "\n".join(failed)
    finally:
        stop(prometheus)
