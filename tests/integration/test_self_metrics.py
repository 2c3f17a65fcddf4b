"""A store that is down, on the real stores: counted by store and kind, logged at WARNING."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftgauge import observe
from driftgauge.app.service import create_app
from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.jobs.adapters import AdapterPool
from driftgauge.jobs.runner import run_check
from driftgauge.state.store import StateStore

from .app_helpers import ended, serving
from .conftest import OS_URL
from .service_helpers import schema_name

pytestmark = pytest.mark.integration
NOW = datetime(2026, 4, 3, 12, tzinfo=UTC)
TOKEN = "t0ken-for-the-self-metrics-test"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONFIG = """
stores:
  warehouse: {{kind: postgres, dsn: "{source}"}}
  search: {{kind: opensearch, url: "{reader}"}}
state: {{dsn: "{state}", schema: {schema}}}
api: {{tokens: ["{token}"]}}
checks:
  reviews:
    source: {{store: warehouse, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: search, index: dg_selfobs_absent, key: task_id, time: completed_at}}
    settle: 0s
"""


@pytest.fixture(scope="module")
async def source_dsn(pg_database: str) -> AsyncIterator[str]:
    conn = await asyncpg.connect(pg_database)
    await conn.execute("CREATE TABLE IF NOT EXISTS tasks (task_id text, completed_at timestamptz)")
    await conn.execute("INSERT INTO tasks VALUES ('t1', '2026-04-02T10:00:00Z')")
    await conn.close()
    yield pg_database


def _config(state: str, source: str, reader: str) -> Config:
    return load_text(
        CONFIG.format(source=source, reader=reader, state=state, schema=schema_name(), token=TOKEN)
    )


async def _run(config: Config) -> str | None:
    state = await StateStore.open(config.state)
    pool = AdapterPool(config.checks)
    check = config.checks["reviews"]
    try:
        result = await run_check(
            check,
            pool.getter("reviews"),
            state,
            NOW - timedelta(days=2),
            NOW,
            trigger="recent",
            now=NOW,
        )
    finally:
        await pool.close()
        await state.close()
    assert result.status == "error"
    return result.failed_store


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "driftgauge.runner" and r.getMessage() == "run finished"
    ]


async def test_a_reader_that_is_down_is_counted_and_logged(
    source_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(source_dsn, source_dsn, "http://127.0.0.1:9")
    before = observe.error_counts().get(("search", "unavailable"), 0)
    runs = observe.RUNS.snapshot().get(("reviews", "recent"), ([0], 0.0))[0][-1]
    timed = observe.STORE_QUERIES.snapshot().get(("warehouse", "preflight"), ([0], 0.0))
    with caplog.at_level(logging.INFO, "driftgauge"):
        assert await _run(config) == "search"
    assert observe.error_counts()[("search", "unavailable")] == before + 1
    # The source answered its preflight before the reader failed: timed, not counted.
    assert observe.STORE_QUERIES.snapshot()[("warehouse", "preflight")][0][-1] == timed[0][-1] + 1
    assert observe.RUNS.snapshot()[("reviews", "recent")][0][-1] == runs + 1
    [line] = _failures(caplog)
    assert line.levelno == logging.WARNING
    assert line.__dict__["store"] == "search"
    assert "StoreUnavailable" in line.__dict__["error"]


async def test_a_source_that_refuses_connections_is_counted_at_open(
    source_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(source_dsn, "postgresql://postgres@127.0.0.1:9/none", OS_URL)
    before = observe.error_counts().get(("warehouse", "unavailable"), 0)
    with caplog.at_level(logging.INFO, "driftgauge"):
        assert await _run(config) == "warehouse"
    assert observe.error_counts()[("warehouse", "unavailable")] == before + 1
    [line] = _failures(caplog)
    assert line.levelno == logging.WARNING and line.__dict__["store"] == "warehouse"


async def test_readyz_stays_ready_while_the_reader_is_down_and_metrics_say_so(
    source_dsn: str,
) -> None:
    config = _config(source_dsn, source_dsn, "http://127.0.0.1:9")
    app = create_app(config, start_scheduler=False, clock=lambda: NOW, refresh_every=3600)
    async with serving(app, "http://dg") as http:
        started = await http.post("/api/v1/checks/reviews/runs", headers=AUTH)
        assert started.status_code == 202, started.text
        run = await ended(http, started.json()["run"], polls=200, headers=AUTH)
        assert run["status"] == "error" and "search" in run["error"]
        await app.state.runtime.snapshots.refresh()
        # A monitored store being down is what driftgauge reports, not a reason to leave.
        assert (await http.get("/readyz")).status_code == 200
        text = (await http.get("/metrics", headers=AUTH)).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    errors = {
        (s.labels["store"], s.labels["kind"]): s.value
        for s in families["driftgauge_store_errors"].samples
        if s.name.endswith("_total")
    }
    assert errors[("search", "unavailable")] >= 1
    assert {k for k in errors if k[0] == "warehouse"} == {
        ("warehouse", k) for k in observe.ERROR_KINDS
    }
    up = [s.value for s in families["driftgauge_check_up"].samples]
    assert up == [0]
    runs = [
        s
        for s in families["driftgauge_run_duration_seconds"].samples
        if s.name.endswith("_count")
        and s.labels["check"] == "reviews"
        and s.labels["trigger"] == "manual"
    ]
    assert runs and runs[0].value >= 1
