"""`driftgauge calibrate` on real stores: both sides timed, each ratio kept for the planner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driftgauge.configfile.loader import load_file
from driftgauge.state.store import StateStore

from .test_cli import cli, config

pytestmark = pytest.mark.integration
__all__ = ["config"]
WINDOW = ("--since", "2026-04-01", "--until", "2026-04-03")


async def test_calibrate_times_both_sides_and_keeps_each_stores_ratio(config: Path) -> None:
    done = cli("calibrate", "reviews", "--config", str(config), *WINDOW, "--rounds", "2", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    by = {s["store"]: s for s in out["stores"]}
    assert set(by) == {"pg", "os"}
    assert (by["pg"]["kind"], by["os"]["kind"]) == ("postgres", "opensearch")
    # The PostgreSQL source holds all 600 rows, the OpenSearch reader one fewer.
    assert (by["pg"]["rows"], by["os"]["rows"]) == (600, 599)
    for s in by.values():
        assert len(s["days_seconds"]) == len(s["digests_seconds"]) == 2
        assert s["digest_pass"] > 0
    assert out["kept"] is True

    cfg = load_file(str(config))
    state = await StateStore.open(cfg.state)
    try:
        kept = await state.costs.digest_pass(["pg", "os", "elsewhere"])
    finally:
        await state.close()
    assert set(kept) == {"pg", "os"}
    assert kept["pg"] == pytest.approx(by["pg"]["digest_pass"], rel=1e-2)

    table = cli("calibrate", "reviews", "--config", str(config), *WINDOW, "--no-store")
    assert table.returncode == 0, table.stderr
    assert "postgres" in table.stdout and "opensearch" in table.stdout
    assert "nothing kept (--no-store)" in table.stdout


def test_calibrate_refuses_a_bad_rounds_count_by_name(config: Path) -> None:
    done = cli("calibrate", "reviews", "--config", str(config), *WINDOW, "--rounds", "0")
    assert done.returncode == 2
    assert "--rounds: 0 is not a positive number of rounds" in done.stderr
    assert "Traceback" not in done.stderr
