"""`make demo-backfill` reproduces night 15: six bad hours, three consumers, both totals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
DEMO = Path(__file__).resolve().parents[2] / "bench" / "backfill" / "demo.py"


def test_the_demo_prints_the_seeds_night_15() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "6 bad hours (05:00, 06:00, 07:00, 08:00, 09:00, 10:00)" in out
    assert "watermark reset point 04:00" in out
    assert "settlement-report (rank 1), demand-forecast (rank 2), payout-export (rank 2)" in out
    assert "refused (409 not_announced)" in out and "refused (409 replay_order)" in out
    # Announced (with the before totals) before the recompute ran.
    assert out.index("2. announce") < out.index("4. recompute")
    assert "signs the report's total: 1,284,310.55" in out
    assert "signed total 1,284,310.55, recomputed total 1,271,902.10, diff -12,408.45" in out
    assert out.index("replay: settlement-report") < out.index("replay: payout-export")
    # The six hours' exact amount_base totals, from the check's measure: the same diff.
    assert "before {'count': 241, 'measures': {'amount_base': '225489.58'}" in out
    assert "after {'count': 241, 'measures': {'amount_base': '213081.13'}" in out
