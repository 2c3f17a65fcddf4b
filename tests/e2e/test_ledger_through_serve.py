"""The run ledger through a running `driftgauge serve`: real PostgreSQL source, real OpenSearch.

A sync job reports yesterday's run: most rows written, a few `no_match` with reason
`no_document` (and the index really lacks them). Closing the run schedules a reconciliation
after the ledger's settle delay, which excuses those keys at zero tolerance. A second run of
the same window never closes, and the window breaches `missing_summary`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from opensearchpy import AsyncOpenSearch

from tests.e2e.support import (
    OS_URL,
    Samples,
    config_text,
    day_window,
    dump_log,
    load_tasks,
    sample,
    scrape,
    scratch_database,
    serve_config,
    serving,
    task_check,
    until,
)
from tests.store_fixtures import load_index

pytestmark = pytest.mark.e2e

TOKEN = "e2e-ledger-" + uuid.uuid4().hex
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JOB = "review-sync"
ROWS = 40
NO_DOCUMENT = {5, 13, 22, 31}
"""Row numbers the sync job finds no document for: they never reach the index."""
SETTLE = timedelta(seconds=2)

# No recent schedule fires during the test (it runs daily at 00:01 UTC: midnight plus settle),
# so every run of the check is one this test asked for: a manual one, then the one the ledger
# schedules.
CONFIG = serve_config(
    "driftgauge_ledger_e2e",
    task_check(
        "reviews",
        "tolerance: {missing_ratio: 0.0, extra: 0, mismatched: 0,"
        " exclusion_rate: {no_document: 0.2}}",
        "schedule: {recent: {every: 1d, days: 3}}",
        "ledger: {job: review-sync, summary_deadline: 1s, no_match_rate: 0.5, settle: 2s}",
    ),
)


@dataclass
class Served:
    """One running service over yesterday's planted rows."""

    url: str
    log: Path
    index: str
    day: date
    keys: list[str]

    @property
    def no_match(self) -> list[str]:
        """Return the keys the sync job reports as no_match (absent from the index)."""
        return [self.keys[i] for i in sorted(NO_DOCUMENT)]

    @property
    def written(self) -> list[str]:
        """Return the keys the sync job wrote."""
        return [k for i, k in enumerate(self.keys) if i not in NO_DOCUMENT]

    def window(self) -> dict[str, str]:
        """Return the run window of the day bucket, as the ledger API takes it."""
        return day_window(self.day)


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    tmp = tmp_path_factory.mktemp("ledger_serve")
    day = datetime.now(UTC).date() - timedelta(days=1)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    keys = [f"r{day:%m%d}-{i:03d}" for i in range(ROWS)]
    rows = [(k, "ok", start + timedelta(minutes=30 * i, seconds=17)) for i, k in enumerate(keys)]
    index = f"dg_e2e_ledger_{uuid.uuid4().hex[:10]}"
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=30)
    log = tmp / "serve.log"
    try:
        async with scratch_database("dg_e2e_ledger") as dsn:
            await load_tasks(dsn, rows)
            await load_index(
                client,
                index,
                {"task_id": "keyword", "label": "keyword", "completed_at": "date"},
                (
                    {"_id": k, "task_id": k, "label": label, "completed_at": t.isoformat()}
                    for i, (k, label, t) in enumerate(rows)
                    if i not in NO_DOCUMENT
                ),
                shards=1,
                replicas=0,
                refresh="wait_for",
            )
            config = tmp / "driftgauge.yml"
            config.write_text(
                config_text(CONFIG, DSN=dsn, OS=OS_URL, TOKEN=TOKEN, INDEX=index), encoding="utf-8"
            )
            async with serving(config, log) as replica:
                yield Served(replica.url, log, index, day, keys)
    finally:
        await client.indices.delete(index=index, ignore_unavailable=True)
        await client.close()


def day_of(days: dict[str, Any], day: date) -> dict[str, Any]:
    """Return one day's entry of a /days response."""
    found: dict[str, Any]
    (found,) = [d for d in days["days"] if d["day"] == day.isoformat()]
    return found


async def finished_run(http: httpx.AsyncClient, run_id: int) -> dict[str, Any]:
    """Wait for a check run to finish and return it."""

    async def done() -> dict[str, Any] | None:
        run: dict[str, Any] = (await http.get(f"/api/v1/checks/reviews/runs/{run_id}")).json()
        return run if run["finished_at"] is not None else None

    return await until(f"check run {run_id} to finish", done, limit=30)


def excluded_rows(s: Samples, day: date, reason: str) -> float | None:
    """Return driftgauge_bucket_excluded_rows of the check's day for one reason."""
    return sample(
        s, "driftgauge_bucket_excluded_rows", check="reviews", day=day.isoformat(), reason=reason
    )


async def test_a_closed_run_excuses_its_no_document_keys_at_zero_tolerance(served: Served) -> None:
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=30)
    try:
        found = await client.mget(index=served.index, body={"ids": served.no_match})
        written = await client.count(index=served.index)
    finally:
        await client.close()
    assert [d["found"] for d in found["docs"]] == [False] * len(NO_DOCUMENT)
    assert written["count"] == ROWS - len(NO_DOCUMENT)

    async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:
        # Before the job reports, the absent keys are plain missing rows: drift.
        triggered = await http.post("/api/v1/checks/reviews/runs", headers=AUTH)
        assert triggered.status_code == 202, triggered.text
        before_run = await finished_run(http, triggered.json()["run_id"])
        assert before_run["status"] == "drift"
        before = day_of((await http.get("/api/v1/checks/reviews/days")).json(), served.day)
        assert (before["missing"], before["excluded"]) == (len(NO_DOCUMENT), {})

        opened = await http.post(
            "/api/v1/ledger/runs",
            headers=AUTH,
            json={"job": JOB, **served.window(), "input_rows": ROWS, "client_run_id": "night-1"},
        )
        assert opened.status_code == 201, opened.text
        run_id = opened.json()["id"]
        half = ROWS // 2
        batches = []
        for n, part in enumerate((served.keys[:half], served.keys[half:])):
            batches.append(
                {
                    "batch_id": f"b{n}",
                    "keys": [
                        {"key": k, "outcome": "no_match", "reason": "no_document"}
                        if k in served.no_match
                        else {"key": k, "outcome": "written"}
                        for k in part
                    ],
                }
            )
        first = await http.post(
            f"/api/v1/ledger/runs/{run_id}/batches", headers=AUTH, json=batches[0]
        )
        second = await http.post(
            f"/api/v1/ledger/runs/{run_id}/batches", headers=AUTH, json=batches[1]
        )
        retried = await http.post(
            f"/api/v1/ledger/runs/{run_id}/batches", headers=AUTH, json=batches[1]
        )
        assert [r.status_code for r in (first, second, retried)] == [200, 200, 200]
        assert [r.json()["duplicate"] for r in (first, second, retried)] == [False, False, True]
        assert (
            retried.json()["outcomes"]
            == second.json()["outcomes"]
            == {
                "written": ROWS - len(NO_DOCUMENT),
                "no_match": len(NO_DOCUMENT),
                "skipped": 0,
                "failed": 0,
            }
        )

        closed = await http.post(
            f"/api/v1/ledger/runs/{run_id}/close",
            headers=AUTH,
            json={
                "status": "success",
                "counts": {"written": ROWS - len(NO_DOCUMENT), "no_match": len(NO_DOCUMENT)},
                "message": "nightly sync",
            },
        )
        assert closed.status_code == 200, closed.text
        run = closed.json()
        assert run["status"] == "success" and run["batches"] == 2
        assert run["reasons"] == {"no_match": {"no_document": len(NO_DOCUMENT)}}
        closed_at = datetime.fromisoformat(run["closed_at"])
        keys = (
            await http.get(
                f"/api/v1/ledger/runs/{run_id}/keys", headers=AUTH, params={"outcome": "no_match"}
            )
        ).json()
        assert sorted(k["key"] for k in keys) == served.no_match
        assert {k["reason"] for k in keys} == {"no_document"}
        # The close judged the window at once: a summary arrived, nothing is breached.
        windows = (await http.get("/api/v1/ledger/windows", params={"job": JOB})).json()
        assert [w["breaches"] for w in windows if w["window_day"] == served.day.isoformat()] == [[]]

        async def ledger_run() -> dict[str, Any] | None:
            runs = (await http.get("/api/v1/checks/reviews/runs")).json()["runs"]
            mine = [r for r in runs if r["trigger"] == "ledger" and r["finished_at"]]
            return mine[0] if mine else None

        reconciled = await until("the reconciliation scheduled by the close", ledger_run, limit=40)
        assert datetime.fromisoformat(reconciled["started_at"]) >= closed_at + SETTLE
        assert (reconciled["status"], reconciled["complete"]) == ("ok", True), dump_log(served.log)

        after = day_of((await http.get("/api/v1/checks/reviews/days")).json(), served.day)
        assert after["run_id"] == reconciled["id"]
        assert after["status"] == "ok" and after["reasons"] == []
        assert after["excluded"] == {"no_document": len(NO_DOCUMENT)}
        assert (after["expected"], after["visible"]) == (ROWS, ROWS - len(NO_DOCUMENT))
        assert (after["missing"], after["extra"], after["mismatched"]) == (0, 0, 0)

        async def exported() -> Samples | None:
            s = await scrape(http, served.url)
            summarised = sample(s, "driftgauge_ledger_runs_total", sync_job=JOB, status="success")
            have = excluded_rows(s, served.day, "no_document") is not None and summarised
            return s if have else None

        s = await until("the excluded rows and the summary on /metrics", exported, limit=40)
    d = served.day.isoformat()
    assert excluded_rows(s, served.day, "no_document") == len(NO_DOCUMENT)
    assert sample(s, "driftgauge_bucket_rows", check="reviews", day=d, kind="missing") == 0
    assert sample(s, "driftgauge_bucket_rows", check="reviews", day=d, kind="excluded") == len(
        NO_DOCUMENT
    )
    assert sample(s, "driftgauge_bucket_status", check="reviews", day=d, status="ok") == 1
    assert sample(s, "driftgauge_ledger_runs_total", sync_job=JOB, status="success") == 1


def breach(s: Samples, rule: str) -> float | None:
    """Return driftgauge_ledger_breach of the job for one rule."""
    return sample(s, "driftgauge_ledger_breach", sync_job=JOB, rule=rule)


async def test_a_run_that_never_closes_breaches_missing_summary(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:

        async def summarised() -> Samples | None:
            s = await scrape(http, served.url)
            return s if breach(s, "missing_summary") == 0 else None

        # The window's run closed (previous test) or the window is still unreported: wait
        # until /metrics says it is fine, so the breach below is the open run's doing.
        if (await http.get("/api/v1/ledger/runs", params={"job": JOB})).json():
            await until("the summarised window to clear missing_summary", summarised, limit=40)

        opened = await http.post(
            "/api/v1/ledger/runs",
            headers=AUTH,
            json={"job": JOB, **served.window(), "input_rows": 3, "client_run_id": "night-1-retry"},
        )
        assert opened.status_code == 201, opened.text
        open_id = opened.json()["id"]
        wrote = await http.post(
            f"/api/v1/ledger/runs/{open_id}/batches",
            headers=AUTH,
            json={"batch_id": "b0", "keys": [{"key": served.keys[0], "outcome": "written"}]},
        )
        assert wrote.status_code == 200, wrote.text

        async def breached() -> list[dict[str, Any]] | None:
            found: list[dict[str, Any]] = (
                await http.get("/api/v1/ledger/breaches", params={"job": JOB, "active": "true"})
            ).json()
            mine = [
                b
                for b in found
                if b["rule"] == "missing_summary"
                and b["window_day"] == served.day.isoformat()
                and str(open_id) in b["detail"]
            ]
            return mine or None

        (recorded,) = await until(
            "a missing_summary breach naming the open run", breached, limit=40
        )
        assert recorded["active"] is True

        async def exported() -> Samples | None:
            s = await scrape(http, served.url)
            return s if breach(s, "missing_summary") == 1 else None

        s = await until("driftgauge_ledger_breach{rule=missing_summary} 1", exported, limit=40)
        run = (await http.get(f"/api/v1/ledger/runs/{open_id}")).json()
    assert run["closed_at"] is None and run["status"] is None
    assert breach(s, "duplicate_summary") == 0
    assert sample(s, "driftgauge_ledger_breaches_total", sync_job=JOB, rule="missing_summary") == 1
