"""`driftgauge backfill ...` and `driftgauge watermark ...` as an operator runs them."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tests.integration.repair_support import (
    AUTH,
    Tables,
    day_zero,
    order_rows,
    post,
    reconcile,
    serve,
)

pytestmark = pytest.mark.integration


async def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "driftgauge.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_a_backfill_from_the_cli_runs_the_replay_commands(
    pg_database: str, tmp_path: Path
) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    await tables.create(order_rows(day, range(4)))
    await tables.corrupt(day + timedelta(hours=2), day + timedelta(hours=3))
    config = tmp_path / "dg.yml"
    config.write_text(tables.config_text())
    replayed = tmp_path / "replayed.txt"
    async with serve(tables.config()) as (_, client):
        await reconcile(client)
        resp = await client.put(
            "/api/v1/consumers/settlement-report",
            headers=AUTH,
            json={
                "kind": "report",
                "owner": "finance",
                "rank": 1,
                "signs": True,
                "signed_by": "duty lead",
                "command": f"echo $DRIFTGAUGE_BACKFILL_ID >> {replayed}",
            },
        )
        assert resp.status_code == 200, resp.text
        await post(
            client,
            "/reads",
            {
                "consumer": "settlement-report",
                "check": "orders",
                "partitions": [
                    {
                        "start": (day + timedelta(hours=2)).isoformat(),
                        "end": (day + timedelta(hours=3)).isoformat(),
                    }
                ],
            },
            201,
        )

    mark = await _cli(
        config,
        "watermark",
        "advance",
        "orders-fact",
        (day + timedelta(hours=3)).isoformat(),
        "--by",
        "nightly",
        "--reason",
        "run 1",
        "--check",
        "orders",
    )
    assert mark.returncode == 0, mark.stderr
    plan = await _cli(
        config,
        "backfill",
        "plan",
        "orders",
        "--by",
        "ana",
        "--reason",
        "currency as text",
        "--pipeline",
        "orders-fact",
    )
    assert plan.returncode == 0, plan.stderr
    found = re.search(r"backfill (\d+) of orders: planned", plan.stdout)
    assert found, plan.stdout
    bf = found.group(1)
    assert "rank 1 settlement-report (report, owner finance, signed by duty lead)" in plan.stdout
    early = await _cli(config, "backfill", "start", bf, "--by", "ana")
    assert early.returncode == 2
    assert "refused: start (not_announced)" in early.stderr
    again = await _cli(config, "backfill", "plan", "orders", "--by", "ana", "--reason", "x")
    assert again.returncode == 2 and "overlapping_backfill" in again.stderr
    for step in ("announce", "start"):
        done = await _cli(config, "backfill", step, bf, "--by", "ana")
        assert done.returncode == 0, done.stderr
    await tables.recompute(day + timedelta(hours=2), day + timedelta(hours=3))
    for step in ("verify", "replay", "close"):
        done = await _cli(config, "backfill", step, bf, "--by", "ana")
        assert done.returncode == 0, done.stderr
    assert replayed.read_text().split() == [bf]
    shown = await _cli(config, "backfill", "show", bf)
    assert f"backfill {bf} of orders: closed" in shown.stdout
    assert "rank 1 settlement-report" in shown.stdout and "finished" in shown.stdout
    assert "diff {'count': 0}" in shown.stdout
    mark = await _cli(config, "watermark", "show", "orders-fact")
    assert re.search(r"back to .*T01:00:00\+00:00 by ana: backfill " + bf, mark.stdout), mark.stdout


async def test_a_plan_from_the_cli_is_checked_as_the_api_checks_it(
    pg_database: str, tmp_path: Path
) -> None:
    config = tmp_path / "dg.yml"
    config.write_text(Tables(pg_database).config_text())
    long = await _cli(config, "backfill", "plan", "orders", "--by", "ana", "--reason", "x" * 2001)
    assert long.returncode == 2, long.stderr
    assert long.stderr.startswith("error: reason: String should have at most 2000 characters")
    assert "Traceback" not in long.stderr


async def test_a_watermark_advance_from_the_cli_is_checked_as_the_api_checks_it(
    pg_database: str, tmp_path: Path
) -> None:
    config = tmp_path / "dg.yml"
    config.write_text(Tables(pg_database).config_text())
    zero = await _cli(
        config,
        "watermark",
        "advance",
        "orders-fact",
        "2026-01-02T00:00:00Z",
        "--by",
        "ana",
        "--reason",
        "caught up",
        "--stall-after",
        "0",
    )
    assert zero.returncode == 2, zero.stderr
    assert zero.stderr.startswith("error: stall_after_seconds: "), zero.stderr
    assert "Traceback" not in zero.stderr
    shown = await _cli(config, "watermark", "show", "orders-fact")
    assert "2026-01-02" not in shown.stdout, shown.stdout
