"""The `state.retention` config: defaults, durations, and problems named by location."""

from __future__ import annotations

from datetime import timedelta

import pytest

from .config_text import config_problems, loaded_state, state_config


def test_retention_defaults_to_30_days_of_runs_and_400_of_ledger() -> None:
    retention = loaded_state("retention").retention
    assert (retention.runs, retention.ledger) == (timedelta(days=30), timedelta(days=400))


def test_retention_takes_durations() -> None:
    retention = loaded_state("retention", "{runs: 2w, ledger: 36h}").retention
    assert (retention.runs, retention.ledger) == (timedelta(weeks=2), timedelta(hours=36))
    assert loaded_state("retention", "{ledger: 90d}").retention.runs == timedelta(days=30)


@pytest.mark.parametrize(
    ("retention", "problem"),
    [
        ("{runs: forever}", "state.retention.runs: 'forever' is not a duration"),
        ("{ledger: 0d}", "state.retention.ledger: must be at least 1h, got 0d"),
        ("{runs: 30d, keep: 1d}", "state.retention.keep: unknown key"),
    ],
)
def test_a_bad_retention_names_its_location(retention: str, problem: str) -> None:
    problems = config_problems(state_config("retention", retention))
    assert any(p.startswith(problem) for p in problems), problems
