"""`driftgauge check` and `driftgauge drill` as a user runs them, on the real stores."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.store_fixtures import OS_URL, PG_OS_STORES, load_index, pg_table, scratch_stores

pytestmark = pytest.mark.integration

BASE = datetime(2026, 4, 1, tzinfo=UTC)

CONFIG = (
    PG_OS_STORES
    + """\
  reviews:
    source: {{store: pg, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: os, index: {index}, key: task_id, time: completed_at}}
    fields: {{label: string}}
    settle: 0s
"""
)


@pytest.fixture
async def config(tmp_path: Path) -> AsyncIterator[Path]:
    """Write a config over a source table and a reader index with planted drift."""
    rows = [
        (f"t{i:04d}", "a" if i % 3 else "b", BASE + timedelta(minutes=7 * i)) for i in range(600)
    ]  # a bit over two days
    async with scratch_stores("dg_cli") as stores:
        await pg_table(
            stores.dsn, "tasks", "task_id text, label text, completed_at timestamptz", rows
        )
        await load_index(
            stores.client,
            stores.index,
            {"task_id": "keyword", "label": "keyword", "completed_at": "date"},
            (
                {
                    "_id": k,
                    "task_id": k,
                    "label": "z" if k == "t0100" else label,  # mismatched
                    "completed_at": when.isoformat(),
                }
                for k, label, when in rows
                if k != "t0050"  # missing
            ),
        )
        path = tmp_path / "dg.yml"
        path.write_text(CONFIG.format(dsn=stores.dsn, os=OS_URL, index=stores.index))
        yield path


Completed = subprocess.CompletedProcess[str]


def cli(*args: str) -> Completed:
    """Run the installed CLI the way a user would."""
    return subprocess.run(
        [sys.executable, "-m", "driftgauge.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def check_reviews(config: Path, since: str, until: str, *flags: str) -> Completed:
    """Run `driftgauge check reviews` over the days since..until, with these flags."""
    return cli(
        "check", "reviews", "--config", str(config), "--since", since, "--until", until, *flags
    )


def test_check_reports_drift_and_exits_1(config: Path) -> None:
    done = check_reviews(config, "2026-04-01", "2026-04-03", "--json")
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    day1 = out["buckets"][0]
    assert (day1["missing"], day1["mismatched"], day1["extra"]) == (1, 1, 0)
    assert sum(b["expected"] for b in out["buckets"]) == 600
    assert out["buckets"][2]["status"] == "ok"
    table = check_reviews(config, "2026-04-01", "2026-04-03")
    assert "2026-04-01" in table.stdout and "drift" in table.stdout
    assert "missing    t0050" in table.stdout


def test_check_on_clean_days_exits_0(config: Path) -> None:
    done = check_reviews(config, "2026-04-03", "2026-04-03", "--no-store")
    assert done.returncode == 0, done.stdout + done.stderr


def test_drill_walks_to_the_keys(config: Path) -> None:
    hours = json.loads(
        cli("drill", "reviews", "2026-04-01", "--config", str(config), "--json").stdout
    )
    bad = [n for n in hours["nodes"] if n["differs"]]
    assert len(bad) == 2  # t0050 and t0100 fall in different hours
    hour = int(bad[0]["label"][11:13])
    leaf = json.loads(
        cli(
            "drill", "reviews", "2026-04-01", "--hour", str(hour), "--config", str(config), "--json"
        ).stdout
    )
    assert [k["key"] for k in leaf["keys"]] == ["t0050"]
    assert leaf["keys"][0]["kind"] == "missing"


def test_unreachable_store_is_exit_2_without_traceback(config: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(config.read_text().replace(OS_URL, "http://127.0.0.1:9"))
    done = cli("check", "reviews", "--config", str(broken), "--no-store")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "os" in done.stderr and "error" in done.stderr


def test_first_pass_with_slots_finds_the_same_keys(config: Path) -> None:
    # Small leaves, so differing days are drilled by slot rather than fetched whole.
    config.write_text(config.read_text() + "    drilldown: {leaf_rows: 50}\n")
    found = {}
    for mode in ("days", "slots"):
        done = check_reviews(
            config, "2026-04-01", "2026-04-03", "--json", "--no-store", "--first-pass", mode
        )
        assert done.returncode == 1, done.stderr
        out = json.loads(done.stdout)
        found[mode] = (
            [(b["missing"], b["extra"], b["mismatched"], b["status"]) for b in out["buckets"]],
            [(b["source"], b["reader"]) for b in out["buckets"]],
            out["queries"],
        )
    assert found["days"][:2] == found["slots"][:2]
    assert [c[:3] for c in found["days"][0]] == [(1, 0, 1), (0, 0, 0), (0, 0, 0)]
    # The slot query the first scan made unnecessary on the PostgreSQL side.
    assert found["slots"][2] < found["days"][2]
    bad = cli("check", "reviews", "--config", str(config), "--first-pass", "hours")
    assert bad.returncode == 2 and "--first-pass" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_check_json_carries_the_run_id_and_sample_keys_the_text_shows(config: Path) -> None:
    window = ["--config", str(config), "--since", "2026-04-01", "--until", "2026-04-03"]
    done = cli("check", "reviews", *window, "--json")
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert isinstance(out["run_id"], int) and out["status"] == "drift"
    samples = {s["key"]: s for s in out["buckets"][0]["samples"]}
    assert samples["t0050"] == {
        "key": "t0050",
        "kind": "missing",
        "source_copies": 1,
        "reader_copies": 0,
        "event_time": samples["t0050"]["event_time"],
    }
    assert (samples["t0100"]["kind"], samples["t0100"]["reader_copies"]) == ("mismatched", 1)
    assert out["buckets"][0]["reasons"] and out["totals"]["missing"] == 1
    text = cli("check", "reviews", *window)
    assert f"run {out['run_id'] + 1} recorded in the state database" in text.stdout
    # Without the state database there is no run id, in either form.
    dry = json.loads(cli("check", "reviews", *window, "--json", "--no-store").stdout)
    assert dry["run_id"] is None and dry["buckets"][0]["samples"]


def test_a_recorded_run_that_failed_logs_one_readable_warning(config: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(config.read_text().replace(OS_URL, "http://127.0.0.1:9"))
    done = cli("check", "reviews", "--config", str(broken), "--json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if "driftgauge.runner: run finished" in x]
    assert " WARNING " in line and 'store="os"' in line and "StoreUnavailable" in line
    out = json.loads(done.stdout)
    assert (out["status"], out["failed_store"]) == ("error", "os")
    assert isinstance(out["run_id"], int)
    as_json = cli("check", "reviews", "--config", str(broken), "--log-format", "json")
    records = [json.loads(x) for x in as_json.stderr.splitlines() if x.startswith("{")]
    assert [r["level"] for r in records if r["msg"] == "run finished"] == ["warning"]
