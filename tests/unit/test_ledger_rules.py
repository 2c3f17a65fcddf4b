"""Ledger rules: each fires on a crafted window and stays silent on a healthy one."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from driftgauge.ledger.models import RULES, Counts, Rule, RunStatus
from driftgauge.ledger.rules import (
    RunFacts,
    WindowFacts,
    derive_status,
    evaluate,
    latest_due_day,
    window_day,
)

DAY = date(2024, 5, 6)


def healthy_run(
    run_id: int = 1, written: int = 590, no_match: int = 10, skipped: int = 35
) -> RunFacts:
    """A run that wrote most rows and excused the rest with reasons (rates under 5%)."""
    out = Counts(written=written, no_match=no_match, skipped=skipped)
    return RunFacts(run_id, out.total, out, "success", out)


def window(*runs: RunFacts, due: bool = True) -> WindowFacts:
    return WindowFacts("review-sync", DAY, due, runs)


def closed_run(
    handed: int, out: Counts, status: RunStatus = "success", claimed: Counts | None = None
) -> dict[Rule, str]:
    """Return the breaches of a due window of one closed run; it claims `out` unless told."""
    return evaluate(
        window(RunFacts(1, handed, out, status, out if claimed is None else claimed)), 0.05
    )


def test_healthy_window_breaches_nothing() -> None:
    assert evaluate(window(healthy_run()), 0.05) == {}


def test_a_window_without_any_run_is_a_missing_summary_once_due() -> None:
    assert set(evaluate(window(), 0.05)) == {"missing_summary"}
    # Before its deadline the same window is not judged for a summary.
    assert evaluate(window(due=False), 0.05) == {}


def test_a_run_that_never_sent_a_summary_is_a_breach_not_no_data() -> None:
    crashed = RunFacts(7, 635, Counts(written=168))
    found = evaluate(window(crashed), 0.05)
    assert set(found) == {"missing_summary"}
    assert "7" in found["missing_summary"]


def test_a_crashed_run_beside_a_good_retry_still_breaches_missing_summary() -> None:
    found = evaluate(window(RunFacts(1, 635, Counts(written=100)), healthy_run(2)), 0.05)
    assert set(found) == {"missing_summary"}


def test_three_summaries_in_one_window_are_duplicates() -> None:
    # Merging by task id leaves the data right; only the ledger sees the retry x3.
    found = evaluate(window(healthy_run(1), healthy_run(2), healthy_run(3)), 0.05)
    assert set(found) == {"duplicate_summary"}
    assert found["duplicate_summary"].startswith("3 summaries")


def test_failed_writes() -> None:
    out = Counts(written=600, failed=35)
    found = closed_run(635, out, "partial_failure")
    assert set(found) == {"failed_writes"}


def test_nothing_written_and_status_mismatch_on_the_key_rename_night() -> None:
    # status=success, updated=0, no_docs_matched=452: the story's first night.
    out = Counts(no_match=452, skipped=183)
    found = closed_run(635, out)
    assert set(found) == {"nothing_written", "no_match_rate", "status_mismatch"}
    # Skipped rows were never looked up: the rate is over the 452 lookups, not the 635 rows.
    assert "452 of 452" in found["no_match_rate"]


def test_no_match_rate_is_over_lookups_not_rows_skipped_without_a_key() -> None:
    # A partial key rename: 6.4% of lookups match nothing, 4% of all rows handed.
    run = healthy_run(written=585, no_match=40, skipped=375)
    found = evaluate(window(run), 0.05)
    assert set(found) == {"no_match_rate"}
    assert "40 of 625 looked-up rows" in found["no_match_rate"]
    # A healthy day (1.8% of lookups) stays silent however many rows had no key.
    assert evaluate(window(healthy_run(written=614, no_match=11, skipped=375)), 0.05) == {}


def test_a_run_that_wrote_more_than_it_was_handed_breaches_written_exceeds_handed() -> None:
    # A double append: 1,628 written for 1,028 handed.
    out = Counts(written=1628)
    found = closed_run(1028, out)
    assert set(found) == {"written_exceeds_handed", "outcomes_mismatch"}
    assert "1628" in found["written_exceeds_handed"]
    assert "1028" in found["written_exceeds_handed"]
    # The job's own summary claiming more than it was handed counts too.
    claimed = RunFacts(2, 1028, Counts(written=1028), "success", Counts(written=1628))
    assert "written_exceeds_handed" in evaluate(window(claimed), 0.05)
    # A run still writing is caught before it closes.
    still_open = RunFacts(3, 1028, Counts(written=1500))
    assert "written_exceeds_handed" in evaluate(window(still_open, due=False), 0.05)


def test_no_match_rate_is_judged_against_the_threshold() -> None:
    run = healthy_run(written=600, no_match=35, skipped=0)  # 5.5%
    assert set(evaluate(window(run), 0.05)) == {"no_match_rate"}
    assert evaluate(window(run), 0.06) == {}


def test_outcomes_that_do_not_add_up_to_the_input() -> None:
    out = Counts(written=600)
    found = closed_run(635, out)
    assert set(found) == {"outcomes_mismatch"}
    assert "600" in found["outcomes_mismatch"] and "635" in found["outcomes_mismatch"]


def test_a_summary_whose_counts_disagree_with_the_reported_outcomes() -> None:
    out = Counts(written=635)
    claimed = Counts(written=630, skipped=5)
    found = closed_run(635, out, claimed=claimed)
    assert set(found) == {"outcomes_mismatch"}


def test_status_mismatch_when_failures_are_reported_as_success() -> None:
    out = Counts(written=630, failed=5)
    found = closed_run(635, out)
    assert set(found) == {"failed_writes", "status_mismatch"}
    assert "partial_failure" in found["status_mismatch"]


@pytest.mark.parametrize(
    ("input_rows", "tally", "status"),
    [
        (0, Counts(), "success"),
        (10, Counts(written=10), "success"),
        (10, Counts(written=9, failed=1), "partial_failure"),
        (10, Counts(failed=10), "failed"),
        (10, Counts(no_match=10), "failed"),
    ],
)
def test_derive_status(input_rows: int, tally: Counts, status: str) -> None:
    assert derive_status(input_rows, tally) == status


def test_every_rule_can_fire() -> None:
    fired: set[str] = set()
    crafted = [
        window(),
        window(healthy_run(1), healthy_run(2)),
        window(RunFacts(1, 10, Counts(written=5, failed=5), "success", None)),
        window(RunFacts(1, 10, Counts(no_match=5), "success", None)),
        window(RunFacts(1, 10, Counts(written=20), "success", None)),
    ]
    for w in crafted:
        fired |= set(evaluate(w, 0.05))
    assert fired == set(RULES)


def test_latest_due_day_respects_the_deadline_in_the_local_zone() -> None:
    tz = ZoneInfo("Europe/Berlin")
    # 05:59 local on the 7th: the 6th ends at midnight, its 6 h deadline has not passed.
    now = datetime(2024, 5, 7, 3, 59, tzinfo=UTC)
    assert latest_due_day(now, tz, timedelta(hours=6)) == date(2024, 5, 5)
    assert latest_due_day(now + timedelta(minutes=2), tz, timedelta(hours=6)) == date(2024, 5, 6)
    assert window_day(datetime(2024, 5, 6, 22, 30, tzinfo=UTC), tz) == date(2024, 5, 7)
