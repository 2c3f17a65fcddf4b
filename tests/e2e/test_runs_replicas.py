"""Runs and replicas through `driftgauge serve`: kill -9 and SIGTERM mid-run, canaries on two
replicas, and the state database going away under a running service.

A run is made slow enough to interrupt reliably by a source view that sleeps in PostgreSQL
on every query. Leases are short here (heartbeat 1 s, expiry 4 s) so detection is measured
in seconds; the figures go to docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from opensearchpy.helpers import async_bulk

from tests.e2e.cut_proxy import CutProxy
from tests.e2e.support import (
    OS_URL,
    PG,
    config_text,
    dump_log,
    free_port,
    load_tasks,
    sample,
    scrape,
    scratch_database,
    scratch_index,
    start_replica,
    stop,
    task_mapping,
    until,
    wait_ready,
)

pytestmark = pytest.mark.e2e

TOKEN = "e2e-" + uuid.uuid4().hex
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HEARTBEAT, EXPIRES = 1.0, 4.0
ROWS = 40
MAPPING = task_mapping("task_id", "label", "driftgauge_canary")
CONFIG = """
stores:
  pg: {kind: postgres, dsn: "<DSN>", timeout_seconds: 60, pool_max: 2}
  os: {kind: opensearch, url: "<OS>", timeout_seconds: 10}
  os_sync: {kind: opensearch, url: "<OS>", timeout_seconds: 10}
state: {dsn: "<STATE>", schema: <SCHEMA>, lease: {heartbeat: 1s, expires: 4s}}
api: {tokens: ["<TOKEN>"], public_read: true}
checks:
  slow:
    source: {store: pg, key: task_id, time: completed_at,
             query: "SELECT t.* FROM tasks t CROSS JOIN pg_sleep(<SLEEP>)"}
    reader:
      store: os
      index: <INDEX>
      key: task_id
      time: completed_at
      filter: {bool: {must_not: [{exists: {field: driftgauge_canary}}]}}
    fields: {label: string}
    schedule: <SCHEDULE>
<CANARY>
"""
CANARY = "    canary: {store: os_sync, document: {label: ok}, every: <EVERY>s, timeout_seconds: 20}"


@dataclass
class Data:
    """The source table and reader index every test reconciles."""

    dsn: str
    index: str
    tmp: Path


@pytest.fixture(scope="module")
async def data(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Data]:
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = [
        (f"t{i:03d}", "ok", start - timedelta(days=1) + timedelta(minutes=30 * i))
        for i in range(ROWS)
    ]
    async with scratch_database("dg_runs") as dsn, scratch_index("dg_runs") as (client, index):
        await load_tasks(dsn, rows)
        await client.indices.create(
            index=index, body={"mappings": MAPPING, "settings": {"number_of_replicas": 0}}
        )
        await async_bulk(
            client,
            (
                {
                    "_index": index,
                    "_id": k,
                    "_source": {"task_id": k, "label": label, "completed_at": t.isoformat()},
                }
                for k, label, t in rows
            ),
            refresh="wait_for",
        )
        yield Data(dsn, index, tmp_path_factory.mktemp("runs"))


def write_config(
    data: Data,
    name: str,
    *,
    sleep: float = 3.0,
    state: str | None = None,
    schedule: str = "{recent: null}",
    canary_every: int | None = None,
) -> Path:
    canary = "" if canary_every is None else CANARY.replace("<EVERY>", str(canary_every))
    path = data.tmp / f"{name}.yml"
    path.write_text(
        config_text(
            CONFIG,
            DSN=data.dsn,
            OS=OS_URL,
            STATE=state or data.dsn,
            SCHEMA=name,
            TOKEN=TOKEN,
            SLEEP=sleep,
            INDEX=data.index,
            SCHEDULE=schedule,
            CANARY=canary,
        ),
        encoding="utf-8",
    )
    return path


class Replica:
    """One `driftgauge serve` child with its URL and log."""

    def __init__(self, config: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = start_replica(config, self.port, log)

    async def ready(self, http: httpx.AsyncClient) -> Replica:
        await wait_ready(http, self.url, self.proc, self.log)
        return self

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


async def start(config: Path, log: Path, http: httpx.AsyncClient) -> Replica:
    return await Replica(config, log).ready(http)


async def run_row(dsn: str, schema: str, run_id: int) -> asyncpg.Record:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        rec = await conn.fetchrow(f"SELECT * FROM {schema}.runs WHERE id = $1", run_id)
    finally:
        await conn.close()
    assert rec is not None
    return rec


async def begin_slow_run(http: httpx.AsyncClient, rep: Replica, dsn: str, schema: str) -> int:
    """Trigger a run of the slow check and wait until it is well under way."""
    resp = await http.post(f"{rep.url}/api/v1/checks/slow/runs", headers=AUTH)
    assert resp.status_code == 202, resp.text
    run_id: int = resp.json()["run_id"]
    await asyncio.sleep(1.5)
    assert (await run_row(dsn, schema, run_id))["status"] == "running"
    return run_id


async def until_ended(dsn: str, schema: str, run_id: int, limit: float) -> asyncpg.Record:
    async def ended() -> asyncpg.Record | None:
        rec = await run_row(dsn, schema, run_id)
        return rec if rec["status"] != "running" else None

    return await until(f"run {run_id} to end", ended, limit=limit)


async def checks_entry(http: httpx.AsyncClient, rep: Replica) -> dict[str, Any]:
    listed = (await http.get(f"{rep.url}/api/v1/checks")).json()["checks"]
    entry: dict[str, Any] = next(c for c in listed if c["name"] == "slow")
    return entry


async def until_counted(http: httpx.AsyncClient, rep: Replica, n: int) -> dict[Any, float]:
    async def counted() -> dict[Any, float] | None:
        s = await scrape(http, rep.url)
        got = sample(s, "driftgauge_check_interrupted_runs_total", check="slow")
        return s if got == n else None

    return await until(f"{n} interrupted runs on {rep.url}/metrics", counted, limit=30)


def record(figure: str, value: float) -> None:
    """Print a measured figure so a run of the suite shows it (-s), for the docs."""
    print(f"\nFIGURE {figure}: {value:.2f}")


async def test_a_sigterm_and_a_kill_9_mid_run_each_end_as_an_interrupted_error(data: Data) -> None:
    schema = "dg_runs_restart"
    config = write_config(data, schema)
    async with httpx.AsyncClient(timeout=15) as http:
        first = await start(config, data.tmp / "restart-1.log", http)
        run_a = await begin_slow_run(http, first, data.dsn, schema)
        assert stop(first.proc) in (0, -signal.SIGTERM)
        rec = await run_row(data.dsn, schema, run_a)
        assert rec["status"] == "error" and not rec["complete"], dump_log(first.log)
        assert rec["error"] == "interrupted: the service shut down mid-run"

        second = await start(config, data.tmp / "restart-2.log", http)
        run_b = await begin_slow_run(http, second, data.dsn, schema)
        assert (await checks_entry(http, second))["running"] is True
        second.kill()
        killed = time.monotonic()
        assert (await run_row(data.dsn, schema, run_b))["status"] == "running"

        third = await start(config, data.tmp / "restart-3.log", http)
        try:
            rec = await until_ended(data.dsn, schema, run_b, limit=EXPIRES + 30)
            record("restart: seconds from kill -9 to interrupted", time.monotonic() - killed)
            assert rec["status"] == "error" and not rec["complete"]
            assert rec["error"].startswith("interrupted: replica "), rec["error"]
            assert rec["finished_at"] is not None
            s = await until_counted(http, third, 2)
            assert sample(s, "driftgauge_check_up", check="slow") == 0
            assert sample(s, "driftgauge_check_runs_total", check="slow", status="error") == 2
            entry = await checks_entry(http, third)
            assert entry["running"] is False
            assert entry["last_run"]["id"] == run_b and entry["status"] == "error"
        finally:
            stop(third.proc)


async def test_the_survivor_of_two_replicas_marks_the_killed_ones_run_within_the_lease(
    data: Data,
) -> None:
    schema = "dg_runs_pair"
    config = write_config(data, schema)
    async with httpx.AsyncClient(timeout=15) as http:
        victim, survivor = await asyncio.gather(
            start(config, data.tmp / "pair-a.log", http),
            start(config, data.tmp / "pair-b.log", http),
        )
        try:
            run_id = await begin_slow_run(http, victim, data.dsn, schema)
            victim.kill()
            killed = time.monotonic()
            rec = await until_ended(data.dsn, schema, run_id, limit=EXPIRES + 30)
            detect = time.monotonic() - killed
            record("two replicas: seconds from kill -9 to interrupted", detect)
            # The last heartbeat was at most one beat before the kill; the survivor looks
            # once a beat: lease + two beats, plus a little for the database round trips.
            assert detect <= EXPIRES + 2 * HEARTBEAT + 1.5, detect
            assert rec["status"] == "error" and rec["error"].startswith("interrupted: "), rec
            s = await until_counted(http, survivor, 1)
            assert sample(s, "driftgauge_check_up", check="slow") == 0
            assert sample(s, "driftgauge_check_runs_total", check="slow", status="error") == 1
            assert (await checks_entry(http, survivor))["running"] is False
            log = [
                json.loads(line)
                for line in survivor.log.read_text().splitlines()
                if line.startswith("{")
            ]
            assert any(r.get("msg") == "marked interrupted runs as failed" for r in log)
        finally:
            stop(survivor.proc)
            stop(victim.proc)


# A canary runs at most once a minute, so this one takes minutes: `make test-replicas`.
CANARY_TIMES = int(os.environ.get("DRIFTGAUGE_E2E_CANARY_TIMES", "0"))


@pytest.mark.skipif(
    CANARY_TIMES < 1,
    reason="minutes long: set DRIFTGAUGE_E2E_CANARY_TIMES "
    "(make test-replicas); tests/integration/test_canary_replicas.py covers "
    "it in seconds",
)
async def test_two_replicas_claim_every_canary_time_once_with_no_false_alarm(data: Data) -> None:
    schema, every, times = "dg_runs_canary", 60, CANARY_TIMES
    config = write_config(data, schema, canary_every=every)
    async with httpx.AsyncClient(timeout=15) as http:
        reps = await asyncio.gather(
            start(config, data.tmp / "canary-a.log", http),
            start(config, data.tmp / "canary-b.log", http),
        )
        conn = await asyncpg.connect(data.dsn, timeout=10)
        try:

            async def enough() -> list[asyncpg.Record] | None:
                recs = await conn.fetch(f"SELECT * FROM {schema}.canary_results ORDER BY id")
                return recs if len(recs) >= times + 1 else None

            await until(f"{times} canary attempts", enough, limit=every * (times + 4) + 30)
            for rep in reps:
                stop(rep.proc)
            results = await conn.fetch(
                f"SELECT result, detail, started_at FROM {schema}"
                ".canary_results ORDER BY started_at"
            )
            alarms = [(r["result"], r["detail"]) for r in results if r["result"] != "ok"]
            record("canary: attempts over two replicas", len(results))
            assert alarms == [], alarms
            claims = await conn.fetch(
                f"SELECT scheduled_for FROM {schema}.job_claims"
                " WHERE job = 'canary:slow' ORDER BY scheduled_for"
            )
        finally:
            await conn.close()
            for rep in reps:
                stop(rep.proc)
    # Every attempt ran under its own claim, one per scheduled time; only the last claim
    # may lack its attempt (the replicas were stopped while it ran).
    slots = [c["scheduled_for"] for c in claims]
    owner = [max(t for t in slots if t <= r["started_at"]) for r in results]
    assert len(set(owner)) == len(owner) == len(results), (slots, owner)
    assert set(slots) - set(owner) <= {slots[-1]}, (slots, owner)
    assert all((b - a).total_seconds() % every == 0 for a, b in itertools.pairwise(slots))
    # Times skipped while an attempt outlasted the period were claimed by no one.
    record("canary: scheduled times spanned", (slots[-1] - slots[0]).total_seconds() / every + 1)


async def test_state_database_down_shows_on_metrics_and_recovers(data: Data) -> None:
    schema = "dg_runs_statedown"
    proxy = CutProxy("127.0.0.1", int(PG.rsplit(":", 1)[1].split("/")[0]), free_port())
    await proxy.start()
    state = f"postgresql://postgres@127.0.0.1:{proxy.port}/" + data.dsn.rsplit("/", 1)[1]
    config = write_config(data, schema, sleep=0, state=state, schedule="{recent: {every: 2s}}")
    async with httpx.AsyncClient(timeout=15) as http:
        rep = await start(config, data.tmp / "statedown.log", http)
        try:

            async def fresh() -> dict[Any, float] | None:
                s = await scrape(http, rep.url)
                up = sample(s, "driftgauge_state_up")
                age = sample(s, "driftgauge_snapshot_age_seconds")
                ok = (
                    up == 1
                    and age is not None
                    and age < 3
                    and sample(s, "driftgauge_check_up", check="slow") == 1
                )
                return s if ok else None

            began = time.monotonic()
            await until("a fresh snapshot", fresh, limit=60)
            record("state down: seconds to the first fresh snapshot", time.monotonic() - began)
            await proxy.cut()
            cut = time.monotonic()

            async def down() -> dict[Any, float] | None:
                s = await scrape(http, rep.url)
                return s if sample(s, "driftgauge_state_up") == 0 else None

            first = await until("state_up 0", down, limit=30)
            record("state down: seconds until state_up 0", time.monotonic() - cut)
            ages = [sample(first, "driftgauge_snapshot_age_seconds")]
            for _ in range(3):
                await asyncio.sleep(1.5)
                s = await scrape(http, rep.url)
                assert sample(s, "driftgauge_state_up") == 0
                ages.append(sample(s, "driftgauge_snapshot_age_seconds"))
            assert all(a is not None for a in ages)
            assert ages == sorted(ages) and ages[-1] - ages[0] >= 4, ages  # type: ignore[operator, type-var]
            await proxy.start()
            back = time.monotonic()
            await until("a fresh snapshot again", fresh, limit=60)
            record("state down: seconds from restore to a fresh snapshot", time.monotonic() - back)
        finally:
            # In a thread: the proxy runs on this loop and shutdown still talks through it.
            code = await asyncio.to_thread(stop, rep.proc)
            await proxy.cut()
    assert code in (0, -signal.SIGTERM), dump_log(rep.log)
