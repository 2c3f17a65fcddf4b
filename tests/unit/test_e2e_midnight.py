"""The end-to-end suite's guard that keeps each module clear of midnight UTC."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.e2e.support import midnight_wait


@pytest.mark.parametrize(
    ("now", "wait"),
    [
        (datetime(2026, 12, 3, 12, 0, tzinfo=UTC), 0.0),
        (datetime(2026, 12, 3, 0, 2, tzinfo=UTC), 0.0),
        (datetime(2026, 12, 3, 23, 55, tzinfo=UTC), 0.0),
        # In the minutes before midnight: wait until the day after is settled.
        (datetime(2026, 12, 3, 23, 55, 1, tzinfo=UTC), 419.0),
        (datetime(2026, 12, 3, 23, 59, 35, tzinfo=UTC), 145.0),
        # Just after midnight: yesterday's bucket is still settling.
        (datetime(2026, 12, 4, 0, 0, 1, tzinfo=UTC), 119.0),
        (datetime(2026, 12, 4, 0, 1, 59, tzinfo=UTC), 1.0),
    ],
)
def test_a_module_waits_only_near_midnight(now: datetime, wait: float) -> None:
    assert midnight_wait(now) == wait
