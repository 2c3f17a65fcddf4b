"""Which window a run covers: the last N day buckets in the check's time zone, up to now."""

from __future__ import annotations

from datetime import datetime, timedelta

from driftgauge.config.frozen import Check


def day_window(check: Check, days: int, now: datetime) -> tuple[datetime, datetime]:
    """Return [start, end): the last `days` day buckets in the check's time zone, up to now."""
    today = now.astimezone(check.timezone).date()
    first = today - timedelta(days=max(days, 1) - 1)
    return datetime(first.year, first.month, first.day, tzinfo=check.timezone), now


def recent_window(check: Check, now: datetime) -> tuple[datetime, datetime]:
    """Return the window of the check's recent schedule."""
    return day_window(check, check.schedule.recent_days, now)


def full_window(check: Check, now: datetime) -> tuple[datetime, datetime]:
    """Return the window of the check's full-history schedule."""
    return day_window(check, check.schedule.full_days, now)


def window_for(check: Check, trigger: str, now: datetime) -> tuple[datetime, datetime]:
    """Return the window a trigger covers: `full` → full history, anything else → recent."""
    return full_window(check, now) if trigger == "full" else recent_window(check, now)
