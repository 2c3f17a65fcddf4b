"""Schemathesis over every operation of `driftgauge serve`, with and without a token.

Every operation (read API, ledger, canary, run now, /metrics) is fuzzed with the schema
conformance checks on: no 5xx, no status code the schema does not document, every body
matching its schema and content type. `make test` runs a bounded pass (the coverage phase,
which walks every boundary and invalid value, only with a token); `make test-fuzz` sets
DRIFTGAUGE_FUZZ_EXAMPLES=100 and runs every phase both ways.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from opensearchpy import AsyncOpenSearch

from tests.e2e.support import (
    OS_URL,
    ROOT,
    config_text,
    load_tasks,
    sample,
    scrape,
    scratch_database,
    serving,
)
from tests.store_fixtures import load_index

pytestmark = pytest.mark.e2e

TOKEN = "fuzz-" + uuid.uuid4().hex
EXAMPLES = int(os.environ.get("DRIFTGAUGE_FUZZ_EXAMPLES", "6"))
LONG = EXAMPLES > 6
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)
CONFIG = """
stores:
  pg: {kind: postgres, dsn: "<DSN>", timeout_seconds: 10, pool_max: 4}
  os: {kind: opensearch, url: "<OS>", timeout_seconds: 10}
state: {dsn: "<DSN>", schema: driftgauge_fuzz}
api: {tokens: ["<TOKEN>"], public_read: true, sample_keys: 20, live_concurrency: 2}
checks:
  reviews:
    source: {store: pg, table: tasks, key: task_id, time: completed_at}
    reader:
      store: os
      index: <INDEX>
      key: task_id
      time: completed_at
      filter: {bool: {must_not: [{exists: {field: driftgauge_canary}}]}}
    fields: {label: string}
    settle: 1m
    schedule: {recent: {every: 1h, days: 3}}
    ledger: {job: review-sync, settle: 1h}
    canary: {store: os, every: 1h, timeout_seconds: 5}
"""


@dataclass
class Served:
    """One running replica with a few rows on both sides."""

    url: str
    log: Path
    dsn: str
    config: Path


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    tmp = tmp_path_factory.mktemp("fuzz")
    index = f"dg_fuzz_{uuid.uuid4().hex[:10]}"
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=30)
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = [
        (f"t{i:03d}", "ok", day - timedelta(days=1) + timedelta(minutes=7 * i)) for i in range(50)
    ]
    async with scratch_database("dg_fuzz") as dsn:
        try:
            await load_tasks(dsn, rows)
            await load_index(
                client,
                index,
                {
                    "task_id": "keyword",
                    "label": "keyword",
                    "completed_at": "date",
                    "driftgauge_canary": "keyword",
                },
                (
                    {"_id": k, "task_id": k, "label": lab, "completed_at": t.isoformat()}
                    for k, lab, t in rows[:-2]
                ),
                replicas=0,
                refresh="wait_for",
            )
            config = tmp / "driftgauge.yml"
            config.write_text(
                config_text(CONFIG, DSN=dsn, OS=OS_URL, TOKEN=TOKEN, INDEX=index), encoding="utf-8"
            )
            log = tmp / "serve.log"
            async with serving(config, log) as replica:
                yield Served(replica.url, log, dsn, config)
        finally:
            await client.indices.delete(index=index, ignore_unavailable=True)
            await client.close()


def fuzz(served: Served, tmp_path: Path, phases: str, *headers: str) -> dict[str, Any]:
    """Run schemathesis over every operation; return its counts and the output."""
    exe = ROOT / ".venv" / "bin" / "schemathesis"
    report = tmp_path / "report.ndjson"
    args = [
        str(exe),
        "run",
        f"{served.url}/openapi.json",
        "--checks",
        CHECKS,
        "--max-examples",
        str(EXAMPLES),
        "--phases",
        phases,
        "--workers",
        "1",
        "--request-timeout",
        "40",
        "--generation-database",
        "none",
        "--seed",
        "1",
        "--no-color",
        "--report-ndjson-path",
        str(report),
        "--suppress-health-check",
        "all",
    ]
    for h in headers:
        args += ["-H", h]
    done = subprocess.run(args, capture_output=True, timeout=600, check=False, cwd=tmp_path)
    out = done.stdout.decode() + done.stderr.decode()
    (tmp_path / "schemathesis.txt").write_text(out, encoding="utf-8")
    return {"code": done.returncode, "out": out, **_tally(report)}


def _tally(report: Path) -> dict[str, Any]:
    """Count the cases and status codes schemathesis recorded in its NDJSON events."""
    statuses: dict[int, int] = {}
    operations: set[str] = set()
    for line in report.read_text(encoding="utf-8").splitlines():
        _walk(json.loads(line), statuses, operations)
    return {
        "cases": sum(statuses.values()),
        "statuses": statuses,
        "operations": operations,
        "server_errors": sum(n for code, n in statuses.items() if code >= 500),
    }


def _walk(node: Any, statuses: dict[int, int], operations: set[str]) -> None:
    # Each response the run recorded carries its status_code; every case has a path/method.
    if isinstance(node, dict):
        if isinstance(node.get("status_code"), int) and "elapsed" in node:
            statuses[node["status_code"]] = statuses.get(node["status_code"], 0) + 1
        if isinstance(node.get("label"), str) and node["label"][:4] in {"GET ", "POST"}:
            operations.add(node["label"])
        for value in node.values():
            _walk(value, statuses, operations)
    elif isinstance(node, list):
        for value in node:
            _walk(value, statuses, operations)


def _summary(name: str, got: dict[str, Any]) -> str:
    line = (
        f"{name}: {got['cases']} cases over {len(got['operations'])} operations, "
        f"{got['server_errors']} 5xx, statuses {dict(sorted(got['statuses'].items()))}"
    )
    print(line)
    return line


OPERATIONS = {
    "GET /healthz",
    "GET /readyz",
    "GET /metrics",
    "GET /api/v1/checks",
    "GET /api/v1/checks/{check}/days",
    "GET /api/v1/checks/{check}/days/{day}",
    "GET /api/v1/checks/{check}/days/{day}/hours/{hour}",
    "GET /api/v1/checks/{check}/days/{day}/keys",
    "GET /api/v1/checks/{check}/runs",
    "GET /api/v1/checks/{check}/runs/{run_id}",
    "POST /api/v1/checks/{check}/runs",
    "POST /api/v1/ledger/runs",
    "POST /api/v1/ledger/runs/{run_id}/batches",
    "POST /api/v1/ledger/runs/{run_id}/close",
    "GET /api/v1/ledger/runs",
    "GET /api/v1/ledger/runs/{run_id}",
    "GET /api/v1/ledger/runs/{run_id}/keys",
    "GET /api/v1/ledger/breaches",
    "GET /api/v1/ledger/windows",
    "POST /api/v1/canary/{check}",
    "GET /api/v1/canary/{check}",
}


@pytest.mark.parametrize("token", [True, False], ids=["token", "no-token"])
def test_every_operation_conforms_and_never_answers_5xx(
    served: Served, tmp_path: Path, token: bool
) -> None:
    headers = [f"Authorization: Bearer {TOKEN}"] if token else []
    # Without a token every write stops at 401: its coverage phase adds little but minutes.
    phases = "examples,coverage,fuzzing" if token or LONG else "examples,fuzzing"
    got = fuzz(served, tmp_path, phases, *headers)
    line = _summary("with a token" if token else "without a token", got)
    assert got["code"] == 0, f"{line}\n{got['out'][-6000:]}"
    assert got["server_errors"] == 0, line
    assert got["operations"] >= OPERATIONS, OPERATIONS - got["operations"]
    assert got["cases"] >= 2 * len(OPERATIONS), line
    if not token:
        assert 401 in got["statuses"], line  # the writes were refused, not run


async def test_serve_starts_over_a_ledger_row_no_api_call_could_write(
    served: Served, tmp_path: Path
) -> None:
    """A window on 9999-12-31 used to end every later start with exit 3."""
    now = datetime.now(UTC)
    conn = await asyncpg.connect(served.dsn, timeout=10)
    try:
        await conn.execute(
            "INSERT INTO driftgauge_fuzz.ledger_runs (job, window_start, window_end,"
            " window_day, input_rows, opened_at, closed_at, status) VALUES ('review-sync',"
            " $1, $2, '9999-12-31', 3, $3, $3, 'success')",
            datetime(9999, 12, 31, tzinfo=UTC),
            datetime(9999, 12, 31, 12, tzinfo=UTC),
            now,
        )
    finally:
        await conn.close()
    log = tmp_path / "second.log"
    started = datetime.now(UTC).replace(microsecond=0)
    async with serving(served.config, log) as replica, httpx.AsyncClient(timeout=10) as http:
        url = replica.url
        s = await scrape(http, url)
        assert (sample(s, "driftgauge_background_errors_total", loop="ledger_deadlines") or 0) >= 1
        # The job's latest due window (yesterday, no summary) is still judged after the
        # bad row; it ended before the ledger began to watch the job, so it is no breach.
        windows = (
            await http.get(
                f"{url}/api/v1/ledger/windows", params={"job": "review-sync", "limit": 1000}
            )
        ).json()
        judged = [
            w for w in windows if w["due"] and datetime.fromisoformat(w["evaluated_at"]) >= started
        ]
        assert judged, windows
        assert all("missing_summary" not in w["breaches"] for w in judged), judged
        assert "9999-12-31" not in {w["window_day"] for w in windows}
    assert "background item failed" in log.read_text(encoding="utf-8")
