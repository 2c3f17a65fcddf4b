"""Data sets, drift and loading for the differential tests: generated once, loaded into real stores.

A `Case` is everything one example needs: the check's zone, window and drill-down
settings, the source rows and the reader rows after drift. It is loaded into a fresh
PostgreSQL table pair (and an OpenSearch index for PG→OS), reconciled by driftgauge,
and compared with tests.oracle on the same rows.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, overload
from zoneinfo import ZoneInfo

from tests import oracle

Pair = Literal["pg-pg", "pg-os"]

# Days whose zone changes offset (or has an odd one), with the zone: the window is the
# day before to the day after, so both local midnights around the change are in it.
ZONE_DAYS: tuple[tuple[str, date], ...] = (
    ("Europe/Berlin", date(2026, 3, 29)),  # spring forward: 02:00 → 03:00
    ("Europe/Berlin", date(2026, 10, 25)),  # fall back: 02:00–03:00 twice
    ("America/New_York", date(2026, 3, 8)),
    ("America/New_York", date(2026, 11, 1)),
    ("Asia/Kathmandu", date(2026, 6, 15)),  # +05:45, no DST
    ("Australia/Lord_Howe", date(2026, 4, 5)),  # half-hour fall back: 01:30–02:00 twice
    ("Australia/Lord_Howe", date(2026, 10, 4)),  # half-hour spring forward: 02:00 → 02:30
    ("UTC", date(2026, 1, 1)),
)

# Key fragments: separators the encodings use, digits, emoji, NFC/NFD, look-alikes of NULL.
KEY_PARTS = (
    "a",
    "B",
    "|",
    ":",
    ";",
    "S1:",
    "N",
    "1",
    "0",
    "-",
    " ",
    "😀",
    "𝄞",
    "é",
    "e\u0301",
    "ключ",
    "None",
    "null",
    "",
)
HIDDEN = "hidden"
"""A label the reader's filter does not show, when the case has one (vocabulary drift)."""
LABELS = (
    HIDDEN,
    "first_tier",
    "second_tier",
    "",
    "a|b",
    "S1:x;N",
    "N",
    "café",
    "cafe\u0301",
    "😀",
    "a😀b𝄞",
    "テスト",
    "l1\nl2\t'\"\\",
    "None",
    " ",
)


@dataclass(frozen=True)
class Row:
    """One row of a side: key, join key (NULL → excluded in the source), content, time."""

    key: Any
    label: str | None
    qty: int | None
    ts: datetime
    ckey: str | None = "c"
    seen: datetime | None = None
    """A timestamp compared as content (OpenSearch `date` keeps milliseconds of it)."""


@dataclass
class Settings:
    """The check's knobs the generator varies."""

    leaf_rows: int = 2000
    dense_ratio: float = 0.2
    max_depth: int = 4
    slot_first_pass_days: int = 62
    slots_first: bool = False
    missing_ratio: float = 0.0
    extra: int = 0
    mismatched: int = 0
    exclusion_rate: float | None = None
    shards: int = 1
    reader_filter: bool = False
    settle_hours: int = 0
    """With a settle, the run happens right at the window's end, so its last days settle."""
    """Read the reader through a filter that hides rows labelled HIDDEN (the reader's view)."""
    digest_width: int | None = None
    """Peel days from difference digests of this width (None: the drill-down only)."""
    days_first: bool = False
    """Plan the first run as with nothing known: day aggregates, then the differing days
    scanned for their digests (each alone while few, else one second pass over them)."""
    rescan: bool = False
    """Run twice over a window of 12 days (9 empty ones first): the second run, as a
    stored run's next one, takes days only and scans each differing day (or the hours
    its drift sat in) alone, planned from the first run's verdicts."""
    parallel_scans: int = 1
    """Both stores split a first pass over several days into this many range queries."""


@dataclass(repr=False)
class Case:
    """One example: where, what and how to check."""

    pair: Pair
    zone: str
    day: date
    key_type: Literal["string", "integer"]
    source: list[Row]
    reader: list[Row]
    settings: Settings = field(default_factory=Settings)

    def __repr__(self) -> str:
        # Short: hypothesis prints it for every example; describe() gives the rows.
        return (
            f"Case({self.pair}, {self.zone}, {self.day}, {self.key_type}, "
            f"{len(self.source)} source / {len(self.reader)} reader rows, {self.settings})"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    @property
    def tz(self) -> ZoneInfo:
        """Return the check's time zone."""
        return ZoneInfo(self.zone)

    def now(self) -> datetime:
        """Return when the run happens: at the window's end with a settle, long after without."""
        end = self.window()[1]
        return end if self.settings.settle_hours else end + timedelta(days=30)

    def window(self) -> tuple[datetime, datetime]:
        """Return [local midnight of the day before, local midnight two days after).

        With `rescan`, from 10 days before: the 3 days with rows are then few enough
        (plan.few_days) for each differing one to be scanned alone.
        """
        first = self.day - timedelta(days=10 if self.settings.rescan else 1)
        last = self.day + timedelta(days=2)
        return (
            datetime(first.year, first.month, first.day, tzinfo=self.tz),
            datetime(last.year, last.month, last.day, tzinfo=self.tz),
        )


def anchors(zone: str, day: date) -> list[datetime]:
    """Return instants worth landing on: local midnights and every offset change near `day`."""
    tz = ZoneInfo(zone)
    out = []
    for d in (day - timedelta(days=1), day, day + timedelta(days=1), day + timedelta(days=2)):
        out.append(datetime(d.year, d.month, d.day, tzinfo=tz).astimezone(UTC))
    t = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC) - timedelta(hours=2)
    prev = t.astimezone(tz).utcoffset()
    for _ in range(28 * 4):
        t += timedelta(minutes=15)
        now = t.astimezone(tz).utcoffset()
        if now != prev:
            out.append(t)  # every zone here changes on a quarter hour
            prev = now
    return out


@overload
def to_ms(moment: datetime) -> datetime: ...
@overload
def to_ms(moment: None) -> None: ...
def to_ms(moment: datetime | None) -> datetime | None:
    """Return a moment floored to its millisecond (before 1970 too)."""
    return None if moment is None else moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def reader_copy(row: Row, pair: Pair) -> Row:
    """Return the row as the sync job writes it; OpenSearch `date` keeps milliseconds."""
    if pair == "pg-os":
        return replace(row, ts=to_ms(row.ts), seen=to_ms(row.seen))
    return row


def nfd(text: str | None) -> str | None:
    """Return the NFD form of a label (the same text when it has nothing to decompose)."""
    return None if text is None else unicodedata.normalize("NFD", text)


def oracle_sides(case: Case) -> tuple[list[oracle.Side], list[oracle.Side]]:
    """Return both sides as the oracle takes them.

    A check against an OpenSearch `date` compares timestamps to the millisecond (the
    coarser side's precision), so both sides' content times are floored there first.
    """

    def content(r: Row) -> tuple[Any, ...]:
        return (r.label, r.qty, to_ms(r.seen) if case.pair == "pg-os" else r.seen)

    src = [
        oracle.Side(r.key, content(r), r.ts, "no_join_key" if r.ckey is None else None)
        for r in case.source
    ]
    rdr = [oracle.Side(r.key, content(r), r.ts) for r in visible_reader(case)]
    return src, rdr


def visible_reader(case: Case) -> list[Row]:
    """Return the reader rows its view shows (all, or those not labelled HIDDEN)."""
    return [r for r in case.reader if not (case.settings.reader_filter and r.label == HIDDEN)]


def oracle_limits(s: Settings) -> oracle.Limits:
    """Return the case's tolerances for the oracle."""
    rate = {} if s.exclusion_rate is None else {"no_join_key": s.exclusion_rate}
    return oracle.Limits(s.missing_ratio, s.extra, s.mismatched, rate)


def pg_records(rows: Sequence[Row]) -> list[tuple[Any, ...]]:
    """Return rows as records for `(k, label, qty, ckey, ts, seen)`."""
    return [(r.key, r.label, r.qty, r.ckey, r.ts, r.seen) for r in rows]


def os_actions(index: str, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Return bulk actions, one document per row (a NULL is an absent field)."""
    out = []
    for i, r in enumerate(rows):
        doc = {
            "k": r.key,
            "label": r.label,
            "qty": r.qty,
            "ts": r.ts.astimezone(UTC).isoformat(timespec="milliseconds"),
            "seen": None
            if r.seen is None
            else r.seen.astimezone(UTC).isoformat(timespec="milliseconds"),
        }
        out.append(
            {
                "_index": index,
                "_id": str(i),
                "_source": {k: v for k, v in doc.items() if v is not None},
            }
        )
    return out


def os_mapping(key_type: str) -> dict[str, Any]:
    """Return the reader index mapping: keyword or long key, millisecond `date` time."""
    return {
        "properties": {
            "k": {"type": "keyword" if key_type == "string" else "long"},
            "label": {"type": "keyword"},
            "qty": {"type": "long"},
            "ts": {"type": "date"},
            "seen": {"type": "date"},
        }
    }


def pg_ddl(table: str, key_type: str) -> str:
    """Return the CREATE TABLE of one side."""
    kt = "text" if key_type == "string" else "bigint"
    return (
        f'CREATE TABLE "{table}" (k {kt}, label text, qty bigint, ckey text, '
        "ts timestamptz, seen timestamptz)"
    )


def is_filler(row: Row) -> bool:
    """Return True for the plain rows the generator adds to make days big."""
    return (
        isinstance(row.key, str)
        and row.key.startswith("fill")
        and row.label is not None
        and row.label.startswith("x")
    ) or (isinstance(row.key, int) and row.key >= 10**12 and row.key < 10**12 + 10**5)


def describe(case: Case) -> str:
    """Return a compact account of a case: every row, or on big cases the rows that differ."""
    lines = [
        f"pair={case.pair} zone={case.zone} day={case.day} key_type={case.key_type} "
        f"settings={case.settings}"
    ]
    synced = {reader_copy(r, case.pair) for r in case.source if r.ckey is not None}
    written = set(case.reader)
    for name, rows in (("source", case.source), ("reader", case.reader)):
        if len(rows) > 80:
            shown = [
                r
                for r in rows
                if (
                    reader_copy(r, case.pair) not in written
                    if name == "source"
                    else r not in synced
                )
            ]
            lines.append(f"{name}: {len(rows)} rows; those without a twin on the other side:")
        else:
            shown = rows
            lines.append(f"{name}: {len(rows)} rows")
        lines += [f"  {r!r}" for r in shown[:80]]
    return "\n".join(lines)
