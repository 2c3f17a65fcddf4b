"""Local days of 23, 24.5 and 25 hours and odd offsets, and rows spread over them."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from driftgauge.encoding import digest as d

ROWS_PER_DAY = 1500


@dataclass(frozen=True)
class Case:
    """One local day of one zone, and where in it the reader is damaged."""

    tz: str
    day: date
    hours: int
    """How many hour buckets the day has (a half hour at the end counts as one)."""
    damage_at: datetime
    """An instant inside the hour bucket that gets all the drift."""
    damaged_label: str
    """That hour bucket's label: its start in local time, with the offset."""

    @property
    def id(self) -> str:
        """Return the case's test id."""
        return f"{self.tz.split('/')[-1]}-{self.day}"

    @property
    def zone(self) -> ZoneInfo:
        """Return the case's zone."""
        return ZoneInfo(self.tz)

    def span(self) -> tuple[datetime, datetime]:
        """Return the local day as [start, end)."""
        start = datetime(self.day.year, self.day.month, self.day.day, tzinfo=self.zone)
        nxt = self.day + timedelta(days=1)
        return start, datetime(nxt.year, nxt.month, nxt.day, tzinfo=self.zone)


def _case(tz: str, day: str, hours: int, damage_at: str, damaged_label: str) -> Case:
    """Return a Case from its ISO dates and instants (damage_at in UTC)."""
    at = datetime.fromisoformat(damage_at).replace(tzinfo=UTC)
    return Case(tz, date.fromisoformat(day), hours, at, damaged_label)


CASES = [
    # Fall back: 02:00-03:00 happens twice; the drift is in the second (winter) one.
    _case("Europe/Berlin", "2026-10-25", 25, "2026-10-25T01:20", "2026-10-25T02:00:00+01:00"),
    # Spring forward: 02:00-03:00 does not happen.
    _case("Europe/Berlin", "2026-03-29", 23, "2026-03-29T01:20", "2026-03-29T03:00:00+02:00"),
    _case("Asia/Kathmandu", "2026-06-10", 24, "2026-06-09T20:30", "2026-06-10T02:00:00+05:45"),
    # Half-hour fall back at 02:00+11:00 to 01:30+10:30: a 24.5-hour day.
    _case("Australia/Lord_Howe", "2026-04-05", 25, "2026-04-04T15:10", "2026-04-05T01:30:00+10:30"),
    # Half-hour spring forward at 02:00+10:30 to 02:30+11:00: a 23.5-hour day.
    _case("Australia/Lord_Howe", "2026-10-04", 24, "2026-10-03T16:10", "2026-10-04T02:30:00+11:00"),
]


@dataclass(frozen=True)
class Row:
    """One row of the DST data set: a key, an instant and one label."""

    id: str
    ts: datetime
    label: str

    def hashes(self) -> tuple[str, int]:
        """Return (key_hash, row_hash) by the Python reference."""
        return _hashes(self)


@functools.cache
def _hashes(row: Row) -> tuple[str, int]:
    """Hash a row once: every kind's test asks Python about the same rows."""
    return d.hash_row(row.id, "string", [row.label], ["string"])


def make_rows() -> list[Row]:
    """Return ROWS_PER_DAY random rows per case plus 8 in each damaged hour."""
    rnd = random.Random(20261025)
    out = []
    for case in CASES:
        start, end = (t.astimezone(UTC) for t in case.span())
        ms = int((end - start) / timedelta(milliseconds=1))
        for i in range(ROWS_PER_DAY):
            ts = start + timedelta(milliseconds=rnd.randrange(ms))
            out.append(Row(f"{case.id}-{i:05d}", ts, f"v{rnd.randrange(100)}"))
    # Rows in every damaged hour, so the damage below always has rows to hit.
    for case in CASES:
        for i in range(8):
            out.append(Row(f"{case.id}-h{i}", case.damage_at + timedelta(seconds=7 * i), "h"))
    return out


def damage(rows: list[Row]) -> list[Row]:
    """Return the reader's copy: per case 2 rows missing, 3 mismatched, 1 extra."""
    out = []
    for r in rows:
        if "-h" not in r.id:
            out.append(r)
            continue
        n = int(r.id.rsplit("h", 1)[1])
        if n < 2:
            continue  # missing
        out.append(Row(r.id, r.ts, "changed") if n < 5 else r)
    for case in CASES:
        out.append(Row(f"{case.id}-extra", case.damage_at + timedelta(seconds=3), "x"))
    return out
