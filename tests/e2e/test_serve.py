"""`driftgauge serve` as a subprocess: real PostgreSQL source, real OpenSearch reader, two replicas.

Drift is planted per day (2 missing, 1 mismatched, 1 extra document); a second check loses
its index half-way (its reader errors) and gets it back.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from tests.e2e.support import (
    OS_URL,
    as_doc,
    free_port,
    load_tasks,
    past_days,
    per_day,
    scrape,
    scratch_database,
    scratch_index,
    serve_config,
    start_replica,
    stop,
    task_check,
    task_mapping,
    until,
    wait_ready,
    write_config,
)

pytestmark = pytest.mark.e2e

TOKEN = "e2e-" + uuid.uuid4().hex
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROWS_PER_DAY = 60
DAYS = 3
MAPPING = task_mapping("task_id", "label")
CONFIG = serve_config(
    "driftgauge_e2e",
    task_check("reviews", "drilldown: {leaf_rows: 20}", "schedule: {recent: {every: 2s, days: 4}}")
    + task_check("flaky", "schedule: {recent: {every: 2s, days: 4}}", index="<FLAKY>"),
)


@dataclass
class Stack:
    """The planted data and the two running replicas."""

    dsn: str
    index: str
    flaky: str
    days: list[date]
    planted: dict[str, dict[str, set[str]]]
    urls: list[str]
    logs: list[Path]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def make_rows(days: list[date]) -> list[dict[str, Any]]:
    """Return ROWS_PER_DAY rows on each day, spread over it."""

    def row(day: date, start: datetime, i: int) -> dict[str, Any]:
        return {
            "task_id": f"t{day:%m%d}-{i:03d}",
            "label": "ok",
            "completed_at": start + timedelta(seconds=30 + i * 86000 // ROWS_PER_DAY),
        }

    return per_day(days, ROWS_PER_DAY, row)


async def load_index(client: AsyncOpenSearch, index: str, rows: list[dict[str, Any]]) -> None:
    await client.indices.create(
        index=index, body={"mappings": MAPPING, "settings": {"number_of_replicas": 0}}
    )
    await async_bulk(
        client,
        ({"_index": index, "_id": r["task_id"], "_source": as_doc(r)} for r in rows),
        refresh="wait_for",
    )


async def plant(
    client: AsyncOpenSearch, index: str, rows: list[dict[str, Any]]
) -> dict[str, dict[str, set[str]]]:
    """Delete 2, alter 1 and add 1 document per day; return the truth per day."""
    truth: dict[str, dict[str, set[str]]] = {}
    by_day: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_day.setdefault(r["completed_at"].date().isoformat(), []).append(r)
    for day, rs in by_day.items():
        gone, changed = [rs[5]["task_id"], rs[33]["task_id"]], rs[12]["task_id"]
        extra = {**rs[20], "task_id": f"x{day}"}
        for key in gone:
            await client.delete(index=index, id=key)
        await client.update(index=index, id=changed, body={"doc": {"label": "wrong"}})
        await client.index(index=index, id=extra["task_id"], body=as_doc(extra))
        truth[day] = {"missing": set(gone), "mismatched": {changed}, "extra": {extra["task_id"]}}
    await client.indices.refresh(index=index)
    return truth


async def load_planted(
    client: AsyncOpenSearch, index: str, dsn: str, rows: list[dict[str, Any]]
) -> dict[str, dict[str, set[str]]]:
    """Fill the source table and the reader index from `rows`, plant drift, return the truth."""
    await load_tasks(dsn, [(r["task_id"], r["label"], r["completed_at"]) for r in rows])
    await load_index(client, index, rows)
    return await plant(client, index, rows)


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    days = past_days(DAYS)
    rows = make_rows(days)
    tmp = tmp_path_factory.mktemp("serve")
    async with scratch_database("dg_e2e") as dsn, scratch_index("dg_e2e") as (client, index):
        flaky = f"{index}_flaky"
        stack = Stack(dsn, index, flaky, days, {}, [], [tmp / "a.log", tmp / "b.log"], rows=rows)
        try:
            stack.planted = await load_planted(client, index, dsn, rows)
            await load_index(client, flaky, rows)
            config = write_config(
                tmp, CONFIG, DSN=dsn, OS=OS_URL, TOKEN=TOKEN, INDEX=index, FLAKY=flaky
            )
            for log in stack.logs:
                port = free_port()
                stack.procs.append(start_replica(config, port, log))
                stack.urls.append(f"http://127.0.0.1:{port}")
            # Both replicas start at once; then each must answer /readyz.
            async with httpx.AsyncClient(timeout=10) as http:
                for url, proc, log in zip(stack.urls, stack.procs, stack.logs, strict=True):
                    await wait_ready(http, url, proc, log)
            yield stack
        finally:
            for proc in stack.procs:
                stop(proc)
            await client.indices.delete(index=flaky, ignore_unavailable=True)


def rows_of(s: dict[Any, float], check: str, day: str, kind: str) -> float | None:
    return s.get(("driftgauge_bucket_rows", (("check", check), ("day", day), ("kind", kind))))


def up(s: dict[Any, float], check: str) -> float | None:
    return s.get(("driftgauge_check_up", (("check", check),)))


async def leader(http: httpx.AsyncClient, stack: Stack) -> tuple[str, dict[Any, float]]:
    """Return the URL and scrape of the replica that exports the stored series."""

    async def elected() -> tuple[str, dict[Any, float]] | None:
        scrapes = {url: await scrape(http, url) for url in stack.urls}
        leaders = [
            (url, s) for url, s in scrapes.items() if s.get(("driftgauge_exporter_leader", ())) == 1
        ]
        return leaders[0] if len(leaders) == 1 else None

    return await until("one exporter leader", elected)


async def test_metrics_report_the_planted_drift_per_bucket(stack: Stack) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        url, _ = await leader(http, stack)

        async def ready() -> dict[Any, float] | None:
            s = await scrape(http, url)
            have = all(
                rows_of(s, check, d.isoformat(), "missing") is not None
                for d in stack.days
                for check in ("reviews", "flaky")
            )
            return s if have else None

        s = await until(f"bucket series on {url}", ready)
        # The stored series are exported once, by the leader: the other replica has none.
        for other in set(stack.urls) - {url}:
            rest = await scrape(http, other)
            assert not [k for k in rest if k[0] == "driftgauge_bucket_rows"], other
            assert rest[("driftgauge_exporter_leader", ())] == 0
        for day in stack.days:
            d = day.isoformat()
            assert rows_of(s, "reviews", d, "expected") == ROWS_PER_DAY
            assert rows_of(s, "reviews", d, "missing") == 2
            assert rows_of(s, "reviews", d, "extra") == 1
            assert rows_of(s, "reviews", d, "mismatched") == 1
            assert rows_of(s, "flaky", d, "missing") == 0
            assert (
                s[
                    (
                        "driftgauge_bucket_status",
                        (("check", "reviews"), ("day", d), ("status", "drift")),
                    )
                ]
                == 1
            )
        assert up(s, "reviews") == 1
        assert s[("driftgauge_check_schedule_seconds", (("check", "reviews"),))] == 2
        assert s[("driftgauge_rows", (("check", "reviews"), ("kind", "missing")))] == 2 * DAYS


async def test_a_lost_reader_flips_up_without_zeroing_rows_then_recovers(stack: Stack) -> None:
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=30)
    day = stack.days[0].isoformat()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            url, _ = await leader(http, stack)

            async def healthy() -> dict[Any, float] | None:
                s = await scrape(http, url)
                return s if up(s, "flaky") == 1 and rows_of(s, "flaky", day, "visible") else None

            before = await until("flaky to be up", healthy)
            success = before[
                ("driftgauge_check_last_success_timestamp_seconds", (("check", "flaky"),))
            ]
            await client.indices.delete(index=stack.flaky)

            async def down() -> dict[Any, float] | None:
                s = await scrape(http, url)
                return s if up(s, "flaky") == 0 else None

            failed = await until("flaky to go down", down)
            assert rows_of(failed, "flaky", day, "visible") == ROWS_PER_DAY
            assert rows_of(failed, "flaky", day, "expected") == ROWS_PER_DAY
            assert (
                failed[("driftgauge_check_last_success_timestamp_seconds", (("check", "flaky"),))]
                >= success
            )
            assert (
                failed[("driftgauge_check_runs_total", (("check", "flaky"), ("status", "error")))]
                >= 1
            )
            assert up(failed, "reviews") == 1  # the other check is not held up

            await load_index(client, stack.flaky, stack.rows)
            await until("flaky to recover", healthy)
    finally:
        await client.close()


async def test_two_replicas_run_each_tick_once_and_never_overlap(stack: Stack) -> None:
    conn = await asyncpg.connect(stack.dsn, timeout=10)
    try:

        async def enough() -> list[Any] | None:
            recs = await conn.fetch(
                "SELECT check_name, scheduled_for, started_at, finished_at, replica"
                " FROM driftgauge_e2e.runs WHERE trigger = 'recent' AND finished_at IS NOT NULL"
                " ORDER BY check_name, started_at"
            )
            return recs if len({r["replica"] for r in recs}) == 2 and len(recs) >= 8 else None

        recs = await until("runs by both replicas", enough)
        dupes = await conn.fetch(
            "SELECT check_name, scheduled_for, count(*) FROM driftgauge_e2e.runs"
            " WHERE trigger = 'recent' GROUP BY 1, 2 HAVING count(*) > 1"
        )
    finally:
        await conn.close()
    assert dupes == []
    for check in ("reviews", "flaky"):
        mine = [r for r in recs if r["check_name"] == check]
        assert mine
        for prev, nxt in itertools.pairwise(mine):
            assert nxt["started_at"] >= prev["finished_at"], "two runs of one check overlapped"
            assert (nxt["scheduled_for"] - prev["scheduled_for"]) % timedelta(
                seconds=2
            ) == timedelta(0)


async def test_api_walk_reaches_the_planted_keys(stack: Stack) -> None:
    url = stack.urls[1]
    day = stack.days[1].isoformat()
    truth = stack.planted[day]
    found: dict[str, set[str]] = {"missing": set(), "extra": set(), "mismatched": set()}
    async with httpx.AsyncClient(timeout=10) as other:
        unknown = await other.get(f"{url}/api/v1/checks/nope/days")
        assert unknown.status_code == 404 and "'nope'" in unknown.text
    async with httpx.AsyncClient(base_url=f"{url}/api/v1/checks/reviews", timeout=30) as http:
        days = (await http.get("/days")).json()["days"]
        assert {d["day"] for d in days} >= {d.isoformat() for d in stack.days}
        stored = (await http.get(f"/days/{day}")).json()
        assert stored["bucket"]["missing"] == 2
        # The day was peeled from its digests: its hours come only live, with the token.
        assert stored["hours"] == [] and stored["hours_live_only"] is True
        assert (await http.get(f"/days/{day}", params={"live": "true"})).status_code == 401
        detail = (await http.get(f"/days/{day}", params={"live": "true"}, headers=AUTH)).json()
        assert detail["bucket"]["missing"] == 2
        assert detail["live"] is True and detail["hours_live_only"] is False
        hours = [datetime.fromisoformat(h["label"]).hour for h in detail["hours"] if h["differs"]]
        assert hours
        for hour in hours:
            live = (
                await http.get(f"/days/{day}/hours/{hour}", params={"live": "true"}, headers=AUTH)
            ).json()
            for prefix in [p["label"] for p in live["prefixes"] if p["differs"]]:
                keys = (
                    await http.get(
                        f"/days/{day}/keys", headers=AUTH, params={"hour": hour, "prefix": prefix}
                    )
                ).json()["keys"]
                for k in keys:
                    found[k["kind"]].add(k["key"])
        assert found == truth
        assert (await http.get(f"/days/{day}/keys")).status_code == 401
        assert (await http.post("/runs")).status_code == 401
        assert (await http.get(f"/days/{day}/hours/24")).status_code == 422
        triggered = await http.post("/runs", headers=AUTH)
        assert triggered.status_code in (202, 409)


async def test_logs_are_json_lines_with_the_run_bound(stack: Stack) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(f"{stack.urls[0]}/api/v1/checks")).status_code == 200

    def read() -> list[dict[str, Any]]:
        text = stack.logs[0].read_text(encoding="utf-8")
        assert text.isascii() and "\\u001b" not in text
        return [json.loads(line) for line in text.split("\n") if line.startswith("{")]

    def logged(lines: list[dict[str, Any]]) -> bool:
        return any(
            rec.get("msg") == "request"
            and rec["path"] == "/api/v1/checks"
            and rec.get("request_id")
            for rec in lines
        )

    # The request line is written after the response went out, so it may trail the answer.
    for _ in range(100):
        if logged(lines := read()):
            break
        await asyncio.sleep(0.1)
    assert logged(lines)
    finished = [rec for rec in lines if rec.get("msg") == "run finished"]
    assert finished and all("check" in rec and "run_id" in rec for rec in finished)
    requests = [rec for rec in lines if rec.get("msg") == "request"]
    # Probes and scrapes that answered are DEBUG lines, below the default level.
    assert not [
        rec
        for rec in requests
        if rec["path"] in ("/healthz", "/readyz", "/metrics") and rec["status"] < 400
    ]


async def test_sigterm_stops_cleanly_and_leaves_no_run_looking_complete(stack: Stack) -> None:
    codes = await asyncio.gather(*(asyncio.to_thread(stop, p) for p in stack.procs))
    # uvicorn re-raises the SIGTERM it handled once shutdown is done.
    assert set(codes) <= {0, -signal.SIGTERM}
    for log in stack.logs:
        text = log.read_text(encoding="utf-8")
        last = [json.loads(line)["msg"] for line in text.split("\n") if line.startswith("{")]
        assert "stopped" in last, f"{log}: the lifespan did not shut down"
    conn = await asyncpg.connect(stack.dsn, timeout=10)
    try:
        left = await conn.fetch(
            "SELECT id, status, complete FROM driftgauge_e2e.runs"
            " WHERE status = 'running' OR (complete AND finished_at IS NULL)"
        )
    finally:
        await conn.close()
    assert left == []
