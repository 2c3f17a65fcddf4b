"""A plain-Python reconciliation: the seed's full outer join, per day of each side's own time.

This is the independent oracle of the differential tests. It imports nothing from
driftgauge: keys and contents are compared as Python values (no encoding, no digest,
no prefix), and day buckets come straight from zoneinfo. The seed's SQL is

    expected = source rows (excluded ones counted under their reason, not joined)
    visible  = distinct reader keys
    FULL OUTER JOIN on the key, then per key: only in the source → missing, only in the
    reader → extra, in both with other content or more than one copy → mismatched

with one change the product makes on purpose: each side's row lands in the day of its
own event time in the check's zone (the seed takes the source's day for a joined key),
so a row moved across midnight is missing from one day and extra in the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Side:
    """One row of either side as the oracle sees it: key, content, time, exclusion."""

    key: Any
    """A str, an int, or None (a NULL key is one key of its own, never equal to "")."""
    content: tuple[Any, ...]
    time: datetime
    excluded: str | None = None
    """The reason of the first exclusion rule the row matches (source rows only)."""


@dataclass(frozen=True)
class Limits:
    """The check's tolerances, restated so the oracle needs no driftgauge import."""

    missing_ratio: float = 0.0
    extra: int = 0
    mismatched: int = 0
    exclusion_rate: Mapping[str, float] = field(default_factory=dict)


@dataclass
class Day:
    """What a correct reconciliation says about one day bucket."""

    expected: int = 0
    visible: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    extra: int = 0
    mismatched: int = 0
    duplicates: int = 0
    status: str = "ok"

    def as_tuple(self) -> tuple[Any, ...]:
        """Return the fields compared with driftgauge's bucket, in the order of FIELDS."""
        # The exclusion tally sorted, so equal tallies print alike in a failure message.
        return tuple(
            dict(sorted(self.excluded.items())) if name == "excluded" else getattr(self, name)
            for name in FIELDS
        )


FIELDS = tuple(f.name for f in fields(Day))
"""The names of Day.as_tuple's fields, in its order: every field of a Day."""


def local_days(start: datetime, end: datetime, tz: ZoneInfo) -> list[date]:
    """Return every local calendar date that overlaps [start, end) in `tz`."""
    first = start.astimezone(tz).date()
    last = (end - timedelta(microseconds=1)).astimezone(tz).date()
    out = []
    while first <= last:
        out.append(first)
        first += timedelta(days=1)
    return out


def _identity(key: Any) -> tuple[str, Any]:
    # Tag each key with its kind so None, "" and "None" can never meet in one dict slot.
    if key is None:
        return ("null", None)
    return ("int", key) if isinstance(key, int) else ("str", key)


def _by_day(
    rows: Iterable[Side], start: datetime, end: datetime, tz: ZoneInfo
) -> dict[date, list[Side]]:
    out: dict[date, list[Side]] = {}
    for r in rows:
        if start <= r.time < end:
            out.setdefault(r.time.astimezone(tz).date(), []).append(r)
    return out


def judge(day: Day, limits: Limits) -> str:
    """Return ok or drift from a day's counts under the check's tolerance rule."""
    should_see = max(day.expected - sum(day.excluded.values()), 0)
    if day.missing and day.missing / max(should_see, 1) > limits.missing_ratio:
        return "drift"
    if day.extra > limits.extra or day.mismatched > limits.mismatched:
        return "drift"
    for reason, n in day.excluded.items():
        limit = limits.exclusion_rate.get(reason)
        if limit is not None and n / max(day.expected, 1) > limit:
            return "drift"
    return "ok"


def reconcile(
    source: Iterable[Side],
    reader: Iterable[Side],
    start: datetime,
    end: datetime,
    tz: ZoneInfo,
    limits: Limits,
    *,
    settled_before: datetime | None = None,
) -> dict[date, Day]:
    """Return the oracle's verdict for every local day of [start, end).

    A day ending after `settled_before` (now minus the check's settle) is `settling`:
    its expected, excluded and visible counts stand, nothing is judged or drilled.
    """
    src_days = _by_day(source, start, end, tz)
    rdr_days = _by_day(reader, start, end, tz)
    out: dict[date, Day] = {}
    for d in local_days(start, end, tz):
        day = Day()
        src: dict[tuple[str, Any], list[Side]] = {}
        for r in src_days.get(d, []):
            day.expected += 1
            if r.excluded is not None:
                day.excluded[r.excluded] = day.excluded.get(r.excluded, 0) + 1
            else:
                src.setdefault(_identity(r.key), []).append(r)
        rdr: dict[tuple[str, Any], list[Side]] = {}
        for r in rdr_days.get(d, []):
            rdr.setdefault(_identity(r.key), []).append(r)
        day.visible = len(rdr)
        next_day = d + timedelta(days=1)
        if (
            settled_before is not None
            and datetime(next_day.year, next_day.month, next_day.day, tzinfo=tz) > settled_before
        ):
            day.status = "settling"
            out[d] = day
            continue
        for key in src.keys() | rdr.keys():
            s, v = src.get(key, []), rdr.get(key, [])
            if not v:
                day.missing += 1
            elif not s:
                day.extra += 1
            elif len(s) == 1 and len(v) == 1 and s[0].content == v[0].content:
                continue
            else:
                day.mismatched += 1
            if len(s) > 1 or len(v) > 1:
                day.duplicates += 1
        day.status = judge(day, limits)
        out[d] = day
    return out


def run_status(days: Iterable[Day]) -> str:
    """Return a run's status: its worst judged day, or nothing_judged when none was judged."""
    statuses = {d.status for d in days}
    if "drift" in statuses:
        return "drift"
    return "ok" if "ok" in statuses else "nothing_judged"
