"""Repair breaches on real PostgreSQL: watermarks, silent changes, rerun probes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from driftgauge.app.service import create_app
from driftgauge.ledger.client import LedgerClient
from driftgauge.repair.client import RepairClient
from tests.integration.repair_support import (
    AUTH,
    ROWS_PER_HOUR,
    TOKEN,
    Tables,
    day_zero,
    order_rows,
    post,
    reconcile,
    serve,
)

pytestmark = pytest.mark.integration


def _hours(first: int, last: int) -> list[dict[str, str]]:
    day = day_zero()
    return [
        {
            "start": (day + timedelta(hours=h)).isoformat(),
            "end": (day + timedelta(hours=h + 1)).isoformat(),
        }
        for h in range(first, last)
    ]


async def _breaches(client: httpx.AsyncClient, kind: str) -> list[dict[str, object]]:
    resp = await client.get("/api/v1/repair/breaches", params={"kind": kind, "active": True})
    assert resp.status_code == 200, resp.text
    out: list[dict[str, object]] = resp.json()
    return out


async def test_a_silent_change_of_a_signed_partition_is_a_breach(pg_database: str) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    await tables.create(order_rows(day, range(6)))
    async with serve(tables.config()) as (_, client):
        for name, signs in (("settlement-report", True), ("demand-forecast", False)):
            resp = await client.put(
                f"/api/v1/consumers/{name}",
                headers=AUTH,
                json={
                    "kind": "report" if signs else "model",
                    "owner": "finance",
                    "rank": 1,
                    "command": f"rebuild {name}",
                    "signs": signs,
                    "signed_by": "settlement duty lead" if signs else None,
                },
            )
            assert resp.status_code == 200, resp.text
            await post(
                client,
                "/reads",
                {"consumer": name, "check": "orders", "partitions": _hours(0, 4)},
                201,
            )
        reads = (await client.get("/api/v1/reads", params={"consumer": "settlement-report"})).json()
        assert {r["seen"]["count"] for r in reads} == {ROWS_PER_HOUR}
        assert (await post(client, "/repair/judge", {}))["silent_changes"] == 0

        # Hour 02 doubles one order outside any backfill; hour 05 was read by nobody.
        await tables.sql("INSERT INTO {fact} SELECT * FROM {fact} WHERE id = 200")
        await tables.sql("INSERT INTO {fact} SELECT * FROM {fact} WHERE id = 500")
        assert (await post(client, "/repair/judge", {}))["silent_changes"] == 1
        [breach] = await _breaches(client, "silent_change")
        partition = (day + timedelta(hours=2)).isoformat()
        assert breach["subject"] == f"orders/settlement-report/{partition}"
        facts = breach["facts"]
        assert isinstance(facts, dict)
        assert facts["before"]["count"] == ROWS_PER_HOUR
        assert facts["after"]["count"] == ROWS_PER_HOUR + 1
        assert "signed by settlement duty lead" in str(breach["detail"])
        text = (await client.get("/metrics")).text
        assert (
            f'driftgauge_silent_change_rows{{check="orders",consumer="settlement-report",'
            f'partition="{partition}",side="after"}} 11.0'
        ) in text

        # The consumer reads the partition again: what it holds now is what it read.
        await post(
            client,
            "/reads",
            {"consumer": "settlement-report", "check": "orders", "partitions": _hours(2, 3)},
            201,
        )
        await post(client, "/repair/judge", {})
        assert await _breaches(client, "silent_change") == []


async def test_watermark_moves_back_outside_a_backfill_and_stalls(pg_database: str) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    await tables.create(order_rows(day, range(1)))
    async with (
        serve(tables.config()) as (app, client),
        RepairClient(
            "http://driftgauge", token=TOKEN, transport=httpx.ASGITransport(app=app)
        ) as repair,
    ):
        await repair.advance(
            "orders-fact",
            day + timedelta(hours=10),
            by="scheduler",
            reason="nightly",
            check="orders",
            stall_after_seconds=0.5,
        )
        back = await client.post(
            "/api/v1/watermarks/orders-fact/advance",
            headers=AUTH,
            json={"to": day.isoformat(), "by": "x", "reason": "oops"},
        )
        assert back.status_code == 422 and back.json()["detail"][0]["loc"] == ["body", "to"]

        mark = await repair.move_back(
            "orders-fact", day + timedelta(hours=4), by="bob", reason="rerun by hand"
        )
        assert mark["moves"][0] == {
            **mark["moves"][0],
            "direction": "back",
            "by": "bob",
            "reason": "rerun by hand",
            "backfill_id": None,
        }
        [moved] = await _breaches(client, "watermark_moved_back")
        assert moved["subject"] == "orders-fact" and "without an open backfill" in str(
            moved["detail"]
        )

        await asyncio.sleep(0.6)
        assert (await post(client, "/repair/judge", {}))["stalled"] == ["orders-fact"]
        text = (await client.get("/metrics")).text
        assert (
            'driftgauge_repair_breach{kind="watermark_stalled",subject="orders-fact"} 1.0' in text
        )
        await repair.advance(
            "orders-fact", day + timedelta(hours=11), by="scheduler", reason="caught up"
        )
        assert await _breaches(client, "watermark_moved_back") == []
        assert await _breaches(client, "watermark_stalled") == []


async def test_two_ledger_runs_of_one_window_that_append_are_caught(pg_database: str) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    lo, hi = day + timedelta(hours=5), day + timedelta(hours=6)
    rows = order_rows(day, range(8))
    await tables.create(rows)
    await tables.sql("DELETE FROM {fact} WHERE created_at >= $1 AND created_at < $2", lo, hi)
    async with serve(tables.config()) as (app, client):
        transport = httpx.ASGITransport(app=app)
        refused = await post(client, "/probes/rerun", {"check": "orders"}, 422)
        assert refused["detail"]["rule"] == "no_rerun"
        for _ in range(2):  # the nightly step, then its rerun "to be safe"
            async with LedgerClient(
                "http://driftgauge",
                job="orders-step",
                window_start=lo,
                window_end=hi,
                input_rows=ROWS_PER_HOUR,
                token=TOKEN,
                transport=transport,
            ) as run:
                n = await tables.append(lo, hi)
                await run.written([str(i) for i in range(n)])
            await reconcile(client)
        probe = await post(client, "/probes/rerun", {"check": "orders"})
        assert probe["verdict"] == "appended"
        assert probe["partitions"][0]["appended"] == ROWS_PER_HOUR
        assert (
            probe["partitions"][0]["run2"]["count"]
            == probe["partitions"][0]["run1"]["count"] + ROWS_PER_HOUR
        )
        [breach] = await _breaches(client, "rerun_appended")
        assert "second run's input was 10 row(s)" in str(breach["detail"])

        # A backfill over the doubled hour cannot verify while the step is not idempotent.
        plan = await post(
            client, "/backfills", {"check": "orders", "by": "ana", "reason": "doubled hour 05"}, 201
        )
        assert [t["start"][11:13] for t in plan["targets"]] == ["05"]
        await post(client, f"/backfills/{plan['id']}/start", {"by": "ana"})
        await tables.recompute(lo, hi)
        stopped = await post(client, f"/backfills/{plan['id']}/verify", {"by": "ana"}, 409)
        assert stopped["detail"]["rule"] == "rerun_appended"


async def test_a_rerun_probe_does_not_blame_the_rerun_for_other_writes(pg_database: str) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    await tables.create(order_rows(day, range(8)))
    await tables.sql("DELETE FROM {fact} WHERE created_at >= $1", day + timedelta(hours=5))
    windows = [(5, 6), (6, 7), (5, 6)]  # window 06 lands between window 05 and its rerun
    async with serve(tables.config()) as (app, client):
        transport = httpx.ASGITransport(app=app)
        for first, last in windows:
            lo, hi = day + timedelta(hours=first), day + timedelta(hours=last)
            async with LedgerClient(
                "http://driftgauge",
                job="orders-step",
                window_start=lo,
                window_end=hi,
                input_rows=ROWS_PER_HOUR,
                token=TOKEN,
                transport=transport,
            ) as run:
                await run.count("written", await tables.recompute(lo, hi))
            await reconcile(client)
        refused = await post(client, "/probes/rerun", {"check": "orders"}, 422)
        assert refused["detail"]["rule"] == "unobserved"
        assert "1 other run(s) of orders-step" in refused["detail"]["detail"]
        assert await _breaches(client, "rerun_appended") == []


STEP = """
import asyncio, os, asyncpg
from datetime import datetime
async def main():
    conn = await asyncpg.connect(os.environ["DSN"])
    lo = datetime.fromisoformat(os.environ["DRIFTGAUGE_PARTITION_START"])
    hi = datetime.fromisoformat(os.environ["DRIFTGAUGE_PARTITION_END"])
    async with conn.transaction():
        if os.environ["SHAPE"] == "overwrite":
            await conn.execute("DELETE FROM {fact} WHERE created_at >= $1 AND created_at < $2",
                               lo, hi)
        await conn.execute("INSERT INTO {fact} SELECT * FROM {orders}"
                           " WHERE created_at >= $1 AND created_at < $2",
                           lo, hi)
    await conn.close()
asyncio.run(main())
"""


def _probe(tables: Tables, tmp_path: Path, shape: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "dg.yml"
    config.write_text(tables.config_text())
    step = tmp_path / "step.py"
    step.write_text(STEP.replace("{fact}", tables.fact).replace("{orders}", tables.orders))
    day = day_zero()
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "driftgauge.cli",
            "probe",
            "rerun",
            "orders",
            "--config",
            str(config),
            "--command",
            f"SHAPE={shape} DSN={tables.dsn} {sys.executable} {step}",
            "--start",
            (day + timedelta(hours=1)).isoformat(),
            "--end",
            (day + timedelta(hours=3)).isoformat(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_probe_rerun_says_converged_for_a_partition_overwrite(
    pg_database: str, tmp_path: Path
) -> None:
    tables = Tables(pg_database)
    asyncio.run(tables.create(order_rows(day_zero(), range(4))))
    done = _probe(tables, tmp_path, "overwrite")
    assert done.returncode == 0, done.stderr
    assert "converged" in done.stdout
    assert f"count {ROWS_PER_HOUR} after run 1, {ROWS_PER_HOUR} after run 2" in done.stdout


def test_probe_rerun_catches_a_step_that_appends(pg_database: str, tmp_path: Path) -> None:
    tables = Tables(pg_database)
    asyncio.run(tables.create(order_rows(day_zero(), range(4))))
    done = _probe(tables, tmp_path, "append")
    assert done.returncode == 1, done.stderr
    assert "appended" in done.stdout
    assert (
        f"count {2 * ROWS_PER_HOUR} after run 1, {3 * ROWS_PER_HOUR} after run 2, "
        f"{ROWS_PER_HOUR} appended"
    ) in done.stdout


async def test_the_job_runtime_judges_repair_breaches(pg_database: str) -> None:
    tables = Tables(pg_database)
    await tables.create(order_rows(day_zero(), range(1)))
    app = create_app(tables.config(), start_scheduler=True, refresh_every=3600)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://driftgauge"
        ) as client,
    ):
        jobs = app.state.runtime.jobs
        assert {"repair-judge", "repair-guard"} <= {j.id for j in jobs.jobs()}
        await post(
            client,
            "/watermarks/orders-fact/advance",
            {
                "to": day_zero().isoformat(),
                "by": "nightly",
                "reason": "run",
                "stall_after_seconds": 0.2,
            },
        )
        await asyncio.sleep(0.3)
        # A time of its own: the runtime may have claimed this minute's already.
        later = datetime.now(UTC) + timedelta(days=1)
        assert await jobs.fire("repair-judge", later) == "ran"
        [stalled] = await _breaches(client, "watermark_stalled")
        assert stalled["subject"] == "orders-fact"
