"""Day and hour buckets as absolute spans, in zones with and without DST."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from driftgauge.core import buckets


def minutes(day: datetime, tz: ZoneInfo) -> list[datetime]:
    """Return every whole minute of a local day, as UTC instants."""
    start = day.replace(tzinfo=tz).astimezone(UTC)
    end = (day + timedelta(days=1)).replace(tzinfo=tz).astimezone(UTC)
    return [start + timedelta(minutes=i) for i in range(int((end - start) / timedelta(minutes=1)))]


@pytest.mark.parametrize(
    ("zone", "day", "hours", "length"),
    [
        ("UTC", datetime(2024, 3, 10), 24, 24.0),
        ("Asia/Kolkata", datetime(2024, 3, 10), 24, 24.0),  # +05:30, no DST
        ("Asia/Kathmandu", datetime(2024, 3, 10), 24, 24.0),  # +05:45
        ("America/New_York", datetime(2024, 3, 10), 23, 23.0),  # spring forward
        ("America/New_York", datetime(2024, 11, 3), 25, 25.0),  # fall back: 01:00 twice
        ("Australia/Lord_Howe", datetime(2024, 4, 7), 25, 24.5),  # a 30-minute fall back
        ("Australia/Lord_Howe", datetime(2024, 10, 6), 24, 23.5),  # a 30-minute spring forward
    ],
)
def test_hours_partition_the_day(zone: str, day: datetime, hours: int, length: float) -> None:
    tz = ZoneInfo(zone)
    spans = buckets.hours_of_day(day.replace(tzinfo=tz), tz)
    assert len(spans) == hours
    assert (spans[-1][1] - spans[0][0]) / timedelta(hours=1) == length
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    labels = [buckets.label(s, tz) for s, _ in spans]
    assert len(set(labels)) == hours
    starts = {s for s, _ in spans}
    for m in minutes(day, tz):
        h = buckets.hour_start(m, tz)
        assert h in starts and h <= m < buckets.hour_end(h, tz)


def test_hour_runs_cut_where_midnight_leaves_the_grid() -> None:
    tz = ZoneInfo("Australia/Lord_Howe")
    start = datetime(2024, 4, 5, tzinfo=tz)
    runs = buckets.hour_runs(start, datetime(2024, 4, 10, tzinfo=tz), tz)
    # The 24.5-hour day ends off the grid of the days before it.
    assert runs[0] == (start.astimezone(UTC), datetime(2024, 4, 8, tzinfo=tz).astimezone(UTC))
    assert len(runs) == 2
    off = datetime(2024, 4, 5, 3, 20, tzinfo=tz)
    first = buckets.hour_runs(off, datetime(2024, 4, 5, 9, tzinfo=tz), tz)[0]
    assert first == (off.astimezone(UTC), datetime(2024, 4, 5, 4, tzinfo=tz).astimezone(UTC))


BERLIN = ZoneInfo("Europe/Berlin")
FALL = date(2026, 10, 25)


@pytest.mark.parametrize(
    ("text", "utc_start"),
    [
        ("02:00+02:00", datetime(2026, 10, 25, 0, tzinfo=UTC)),
        ("02:00+01:00", datetime(2026, 10, 25, 1, tzinfo=UTC)),
        ("2026-10-25T01:00:00Z", datetime(2026, 10, 25, 1, tzinfo=UTC)),
        ("2026-10-25T02:00:00+01:00", datetime(2026, 10, 25, 1, tzinfo=UTC)),
        ("3", datetime(2026, 10, 25, 2, tzinfo=UTC)),
        ("0", datetime(2026, 10, 24, 22, tzinfo=UTC)),
    ],
)
def test_resolve_hour_by_instant_or_unique_local_hour(text: str, utc_start: datetime) -> None:
    start, end = buckets.resolve_hour(text, FALL, BERLIN)
    assert (start, end) == (utc_start, utc_start + timedelta(hours=1))


@pytest.mark.parametrize(
    ("text", "day", "message"),
    [
        ("2", FALL, r"ambiguous: name one by its offset, 02:00\+02:00 or 02:00\+01:00"),
        ("2", date(2026, 3, 29), "the clocks skip it"),
        ("24", FALL, "not a local hour 0-23"),
        ("02:30+01:00", FALL, "not the start of an hour bucket"),
        ("2026-10-25T01:00:00", FALL, "has no offset"),
        ("soon", FALL, "not a local hour"),
    ],
)
def test_resolve_hour_names_the_problem(text: str, day: date, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        buckets.resolve_hour(text, day, BERLIN)
