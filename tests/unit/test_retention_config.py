"""The `state.retention` config: defaults, durations, and problems named by location."""

from __future__ import annotations

from datetime import timedelta

import pytest

from driftgauge.configfile.loader import load_text

from .config_text import config_head, config_problems

CHECKS = """
  orders:
    source: {store: src, table: orders, key: id, time: created_at}
    reader: {store: src, table: orders_copy, key: id, time: created_at}
"""


def config(retention: str = "") -> str:
    """Return a minimal config with `retention` spliced into the state section."""
    return config_head(f", retention: {retention}" if retention else "", src="postgres") + CHECKS


def test_retention_defaults_to_30_days_of_runs_and_400_of_ledger() -> None:
    retention = load_text(config()).state.retention
    assert (retention.runs, retention.ledger) == (timedelta(days=30), timedelta(days=400))


def test_retention_takes_durations() -> None:
    retention = load_text(config("{runs: 2w, ledger: 36h}")).state.retention
    assert (retention.runs, retention.ledger) == (timedelta(weeks=2), timedelta(hours=36))
    assert load_text(config("{ledger: 90d}")).state.retention.runs == timedelta(days=30)


@pytest.mark.parametrize(
    ("retention", "problem"),
    [
        ("{runs: forever}", "state.retention.runs: 'forever' is not a duration"),
        ("{ledger: 0d}", "state.retention.ledger: must be at least 1h, got 0d"),
        ("{runs: 30d, keep: 1d}", "state.retention.keep: unknown key"),
    ],
)
def test_a_bad_retention_names_its_location(retention: str, problem: str) -> None:
    problems = config_problems(config(retention))
    assert any(p.startswith(problem) for p in problems), problems
