"""The dates the API accepts: a sane range, so no stored day can overflow a later computation."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

# No check or sync job holds data from before this day.
FIRST_DAY = date(2000, 1, 1)
# How far ahead of today a day may be (a window opened early, a clock a little fast).
AHEAD = timedelta(days=366)
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_SURROGATE = re.compile("[\ud800-\udfff]")


def last_day(now: datetime | None = None) -> date:
    """Return the latest day the API accepts, one year past `now` (default: the wall clock)."""
    return ((now or datetime.now(UTC)).astimezone(UTC) + AHEAD).date()


def day_problem(day: date, now: datetime | None = None) -> str | None:
    """Return why `day` is out of range, or None when it is accepted."""
    last = last_day(now)
    if not FIRST_DAY <= day <= last:
        return f"must be between {FIRST_DAY} and {last}"
    return None


def sane_instant(moment: datetime) -> datetime:
    """Return `moment` if its local date is in range; raise ValueError naming the range."""
    # The local date, before any conversion: year 1 at +05:00 must not overflow here.
    problem = day_problem(moment.date())
    if problem:
        raise ValueError(problem)
    return moment


def iso_day(value: Any) -> Any:
    """Refuse anything but YYYY-MM-DD text for a day (a bare 0 is not 1970-01-01)."""
    if value is None or isinstance(value, date):
        return value
    if not isinstance(value, str) or not _ISO_DAY.match(value):
        raise ValueError("must be a date as YYYY-MM-DD")
    return value


def no_lone_surrogates(value: Any) -> Any:
    """Refuse text holding a lone UTF-16 surrogate: it is not Unicode and no store takes it."""
    if isinstance(value, str) and _SURROGATE.search(value):
        raise ValueError("contains a lone UTF-16 surrogate, which is not valid text")
    return value


def json_safe(value: Any) -> Any:
    """Return `value` with non-finite floats and lone surrogates made printable for JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
