"""`make demo`'s summary line waits for, and agrees with, every synced day's verdict."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from faults.demo_summary import summary, unjudged

FIRST, LAST = date(2026, 11, 27), date(2026, 12, 3)


def _days(statuses: dict[str, str]) -> list[dict[str, str]]:
    return [{"day": day, "status": status} for day, status in statuses.items()]


def test_a_week_whose_last_day_is_still_settling_is_not_judged() -> None:
    # What the demo read before: six days judged, the last one's run not done yet.
    days = _days(
        {
            **{f"2026-11-{d}": "ok" for d in range(27, 31)},
            "2026-12-01": "ok",
            "2026-12-02": "drift",
            "2026-12-03": "settling",
        }
    )
    assert unjudged(days, FIRST, LAST) == ["2026-12-03"]
    assert summary(days, FIRST, LAST) == "drift on 2026-12-02; not judged yet: 2026-12-03"


def test_a_day_absent_from_the_answer_is_not_judged() -> None:
    days = _days({f"2026-11-{d}": "ok" for d in range(27, 31)})
    assert unjudged(days, FIRST, LAST) == ["2026-12-01", "2026-12-02", "2026-12-03"]


def test_every_day_judged_names_each_drifting_and_erroring_day_in_the_window() -> None:
    days = _days(
        {
            "2026-11-26": "drift",  # before the window: not the demo's to report
            **{f"2026-11-{d}": "ok" for d in range(27, 31)},
            "2026-12-01": "error",
            "2026-12-02": "drift",
            "2026-12-03": "drift",
        }
    )
    assert unjudged(days, FIRST, LAST) == []
    assert summary(days, FIRST, LAST) == "drift on 2026-12-02, 2026-12-03; error on 2026-12-01"
    assert summary(_days({"2026-11-27": "ok"}), FIRST, FIRST) == "no drift"
