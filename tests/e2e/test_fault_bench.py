"""The fault bench, reduced: six days, three faults from day 3 and the healthy baseline.

Real PostgreSQL and OpenSearch; driftgauge's own ledger, canary and reconciliation judge
what the sync job did, and every alarm is read back from driftgauge's state.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from faults.bench import BenchResult, BenchSpec, run_bench
from faults.detectors import DETECTORS

pytestmark = pytest.mark.e2e

SPEC = BenchSpec(
    days=6,
    onset=3,
    scale=0.3,
    faults=("key_rename", "retry_merge", "vocabulary_drift"),
    healthy=True,
    ablations=False,
    sweep=(),
    parallel=2,
)


@pytest.fixture(scope="module")
async def bench() -> BenchResult:
    """Run the reduced bench once for every test of this module."""
    return await run_bench(SPEC)


def fired(result: BenchResult, scenario: str) -> set[str]:
    """Return the detectors that raised an alarm in a scenario."""
    outcome = result.outcomes[scenario]
    return {d for d in DETECTORS if outcome.hours(d) is not None}


async def test_healthy_baseline_raises_no_alarm(bench: BenchResult) -> None:
    healthy = bench.outcomes["healthy"]
    assert fired(bench, "healthy") == set()
    # Quiet because the detectors ran and found nothing, not because they never ran.
    assert healthy.counts["recon_runs"] >= 2 * (SPEC.days - 1)
    assert healthy.counts["recon_failed_runs"] == 0
    assert healthy.counts["canary_runs"] == SPEC.days - 1
    assert healthy.counts["ledger_windows"] == SPEC.days - 1
    assert healthy.counts["sync_runs"] == SPEC.days - 1


async def test_key_rename_pages_through_ledger_and_exclusion_rate(bench: BenchResult) -> None:
    outcome = bench.outcomes["key_rename"]
    assert {"ledger", "reconciliation"} <= fired(bench, "key_rename")
    assert "status" not in fired(bench, "key_rename")
    rules = {b["rule"] for b in outcome.alarms["ledger"].ref["breaches"]}
    assert "no_match_rate" in rules
    recon = outcome.alarms["reconciliation"].ref
    assert recon["run_id"] > 0
    assert any(
        "excluded[no_document]" in reason
        for bucket in recon["first_buckets"]
        for reason in bucket["reasons"]
    )
    # The first run that saw renamed keys is the onset day's sync, the next day at 01:00.
    hours = outcome.hours("reconciliation")
    assert hours is not None and 25 <= hours < 26


async def test_idempotent_retry_is_a_ledger_catch_only(bench: BenchResult) -> None:
    outcome = bench.outcomes["retry_merge"]
    assert fired(bench, "retry_merge") == {"ledger"}
    rules = {b["rule"] for b in outcome.alarms["ledger"].ref["breaches"]}
    assert "duplicate_summary" in rules
    assert outcome.counts["recon_runs"] > 0


async def test_vocabulary_drift_is_a_reconciliation_catch_only(bench: BenchResult) -> None:
    outcome = bench.outcomes["vocabulary_drift"]
    assert fired(bench, "vocabulary_drift") == {"reconciliation"}
    buckets = outcome.alarms["reconciliation"].ref["first_buckets"]
    assert buckets and all(b["missing"] > 0 and b["extra"] == 0 for b in buckets)
