"""Pure drill-down decisions: hour labels of slots, in zones with and without DST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from driftgauge.engine import plan


def minutes(day: datetime, tz: ZoneInfo) -> list[datetime]:
    """Return every whole minute of a local day, as UTC instants."""
    start = day.replace(tzinfo=tz).astimezone(UTC)
    end = (day + timedelta(days=1)).replace(tzinfo=tz).astimezone(UTC)
    return [start + timedelta(minutes=i) for i in range(int((end - start) / timedelta(minutes=1)))]


@pytest.mark.parametrize(("zone", "day", "hours"), [
    ("UTC", datetime(2024, 3, 10), 24),
    ("Asia/Kolkata", datetime(2024, 3, 10), 24),          # +05:30, no DST
    ("America/New_York", datetime(2024, 3, 10), 23),      # spring forward
    ("America/New_York", datetime(2024, 11, 3), 25),      # fall back: 01:00 twice
    ("Australia/Lord_Howe", datetime(2024, 4, 7), 24),    # a 30-minute DST change
])
def test_hour_labels_equal_hour_of(zone: str, day: datetime, hours: int) -> None:
    tz = ZoneInfo(zone)
    moments = minutes(day, tz)
    label = plan.hour_labeler(moments, tz)
    got = [label(m) for m in moments]
    assert got == [plan.hour_of(m, tz).isoformat() for m in moments]
    assert len(set(got)) == hours


def test_hour_labels_of_no_moments_still_answer() -> None:
    tz = ZoneInfo("Europe/Berlin")
    moment = datetime(2024, 6, 1, 12, 34, tzinfo=UTC)
    assert plan.hour_labeler([], tz)(moment) == "2024-06-01T14:00:00+02:00"
