"""Day and hour buckets as absolute instants; the local labels people read are derived.

A day bucket is [local midnight, next local midnight): 23, 24 or 25 hours, or 23.5 and
24.5 where a zone shifts by half an hour. Its hour buckets are whole hours of elapsed
time from that midnight, the last one cut at the day's end, so a day that falls back
has two hours whose local clock reads 02:00 (labelled 02:00+02:00 and 02:00+01:00), and
slots of any length dividing an hour never straddle one. Buckets are keyed and compared
by their UTC start, never by a wall-clock datetime: two aware datetimes of one zone
that differ only in `fold` compare and hash equal in Python.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

HOUR = timedelta(hours=1)


def utc(moment: datetime) -> datetime:
    """Return an aware moment as the same instant in UTC."""
    return moment.astimezone(UTC)


def midnight(day: date, tz: ZoneInfo) -> datetime:
    """Return the first instant of a local date, in UTC."""
    return utc(datetime(day.year, day.month, day.day, tzinfo=tz))


def local_date(moment: datetime, tz: ZoneInfo) -> date:
    """Return the local date of the day bucket that holds `moment`."""
    return moment.astimezone(tz).date()


def day_start(moment: datetime, tz: ZoneInfo) -> datetime:
    """Return the UTC start of the day bucket that holds `moment`."""
    return midnight(local_date(moment, tz), tz)


def day_end(start: datetime, tz: ZoneInfo) -> datetime:
    """Return the UTC end of the day bucket that starts at `start` (the next midnight)."""
    return midnight(local_date(start, tz) + timedelta(days=1), tz)


def hour_start(moment: datetime, tz: ZoneInfo) -> datetime:
    """Return the UTC start of the hour bucket that holds `moment`."""
    day = day_start(moment, tz)
    return day + (utc(moment) - day) // HOUR * HOUR


def hours_of_day(start: datetime, tz: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """Return the [start, end) of every hour bucket of the day that starts at `start`."""
    lo, end = utc(start), day_end(start, tz)
    out = []
    while lo < end:
        out.append((lo, min(lo + HOUR, end)))
        lo += HOUR
    return out


def hour_end(start: datetime, tz: ZoneInfo) -> datetime:
    """Return the end of the hour bucket that starts at `start` (cut at the day's end)."""
    return min(utc(start) + HOUR, day_end(start, tz))


def label(start: datetime, tz: ZoneInfo) -> str:
    """Return a bucket start as people read it: local ISO 8601 time with its offset."""
    return start.astimezone(tz).isoformat()


def hour_runs(start: datetime, end: datetime, tz: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """Split [start, end) into runs whose 3600-second slots, aligned on the run's start, are
    exactly its hour buckets.

    A run ends where the next local midnight falls off its hour grid (a half-hour shift)
    or, for a start off the grid, at the end of that first partial hour.
    """
    lo, stop = utc(start), utc(end)
    out = []
    while lo < stop:
        day = day_start(lo, tz)
        off = (lo - day) % HOUR
        if off:
            hi = min(lo - off + HOUR, day_end(day, tz))
        else:
            hi = day_end(day, tz)
            while hi < stop and (hi - day) % HOUR == timedelta(0):
                hi = day_end(hi, tz)
        hi = min(hi, stop)
        out.append((lo, hi))
        lo = hi
    return out


_LOCAL = re.compile(r"^(\d{1,2}):(\d{2})([+-]\d{2}:\d{2}|Z)$")


def resolve_hour(text: str, day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """Return the [start, end) (UTC) of the hour bucket of local `day` named by `text`.

    Accepted: a local hour `0`-`23` (only where exactly one hour bucket starts then),
    a local time with its offset (`02:00+01:00`), or an instant (`2026-10-25T01:00:00Z`).
    Raises ValueError naming the choices when the text is ambiguous or names no hour.
    """
    text = text.strip()
    hours = hours_of_day(midnight(day, tz), tz)
    labels = [label(s, tz) for s, _ in hours]
    choices = ", ".join(lb[11:16] + lb[19:] for lb in labels)
    if text.isdigit():
        wanted = int(text)
        if not 0 <= wanted <= 23:
            raise ValueError(f"{text!r} is not a local hour 0-23")
        found = [h for h, lb in zip(hours, labels, strict=True) if int(lb[11:13]) == wanted]
        if len(found) == 1:
            return found[0]
        if not found:
            raise ValueError(
                f"no hour bucket of {day} in {tz.key} starts at local hour "
                f"{wanted} (the clocks skip it); its hours are {choices}"
            )
        named = " or ".join(label(s, tz)[11:16] + label(s, tz)[19:] for s, _ in found)
        raise ValueError(
            f"local hour {wanted} of {day} in {tz.key} is ambiguous: "
            f"name one by its offset, {named}"
        )
    m = _LOCAL.match(text)
    try:
        if m is not None:
            offset = "+00:00" if m.group(3) == "Z" else m.group(3)
            moment = datetime.fromisoformat(
                f"{day.isoformat()}T{int(m.group(1)):02d}:{m.group(2)}:00{offset}"
            )
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a local hour (2), a local time with offset "
            "(02:00+01:00) or an instant (2026-10-25T01:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no offset; give one (02:00+01:00) or a local hour")
    for h in hours:
        if h[0] == utc(moment):
            return h
    raise ValueError(
        f"{text!r} is not the start of an hour bucket of {day} in {tz.key}; its hours are {choices}"
    )
