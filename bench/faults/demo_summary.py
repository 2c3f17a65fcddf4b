"""What `make demo` says of the service's day buckets, once every synced day is judged."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

JUDGED = ("ok", "drift", "error")
"""Statuses a completed run leaves a settled day with: its verdict (or why there is none)."""


def every_day(first: date, last: date) -> list[str]:
    """Return the ISO dates from first to last, both included."""
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def unjudged(days: Sequence[dict[str, Any]], first: date, last: date) -> list[str]:
    """Return the days of [first, last] no completed run has judged yet, in order."""
    status = {d["day"]: d["status"] for d in days}
    return [day for day in every_day(first, last) if status.get(day) not in JUDGED]


def summary(days: Sequence[dict[str, Any]], first: date, last: date) -> str:
    """Return the reconciliation line: the days in drift (and in error), or what is not judged."""
    waiting = unjudged(days, first, last)
    wanted = set(every_day(first, last))
    drift = [d["day"] for d in days if d["day"] in wanted and d["status"] == "drift"]
    errors = [d["day"] for d in days if d["day"] in wanted and d["status"] == "error"]
    line = f"drift on {', '.join(drift)}" if drift else "no drift"
    if errors:
        line += f"; error on {', '.join(errors)}"
    if waiting:
        line += f"; not judged yet: {', '.join(waiting)}"
    return line
