"""One deterministic data set loaded into both stores, and what Python says about it."""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, cast
from zoneinfo import ZoneInfo

from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.fields import FieldType
from driftgauge.encoding import digest as d
from driftgauge.encoding import iblt
from driftgauge.stores.base import BucketDigest, RowHash

TZ = ZoneInfo("America/New_York")  # non-UTC, and 2024-03-10 has 23 hours
START = datetime(2024, 3, 8, tzinfo=TZ)
END = datetime(2024, 3, 14, tzinfo=TZ)
DST_DAY = (datetime(2024, 3, 10, tzinfo=TZ), datetime(2024, 3, 11, tzinfo=TZ))
"""A local day of 23 hours, starting at 05:00 UTC."""
ODD = (datetime(2024, 3, 9, 13, 37, 42, 123000, tzinfo=TZ), datetime(2024, 3, 11, 2, 0, tzinfo=TZ))
"""A window whose start is on no round UTC boundary and that crosses two local midnights."""
STEP = timedelta(minutes=4)
_FIRST, _DST = START.astimezone(UTC), DST_DAY[0].astimezone(UTC)
RANGES = [
    (_FIRST + 5 * STEP, _FIRST + 6 * STEP),
    (_FIRST + 6 * STEP, _FIRST + 7 * STEP),  # adjacent to the first
    (_DST + timedelta(hours=1), _DST + timedelta(hours=3)),  # 01:00 EST to 04:00 EDT
    (_DST + timedelta(hours=2, minutes=30), _DST + timedelta(hours=2, minutes=50)),
    (END - timedelta(days=2, minutes=10), END - timedelta(days=2, minutes=6)),
]
"""Sub-ranges of [START, END) on three days; the fourth lies inside the third."""
ROWS = 10_000
ONLY_EXCLUDED = 40
"""The last rows fall on 2024-03-13 with tier 'c': a bucket a PG source excludes entirely."""
LABELS = [
    "hello",
    "",
    None,
    "a|b",
    "b|c",
    "S1:x;N",
    "café ü",
    "a😀b𝄞",
    "テスト",
    "e\u0301",
    "l1\nl2\t'\"\\",
    "N",
    "ключ",
]
FIELDS = {
    "label": ("label", "string"),
    "amount": ("amount", "decimal"),
    "qty": ("qty", "integer"),
    "flag": ("flag", "boolean"),
    "updated_at": ("updated_at", "timestamp"),
}
TYPES = [cast(FieldType, t) for _, t in FIELDS.values()]

PG_DDL = (
    "CREATE TABLE items (id text, ts timestamptz, label text, amount numeric(12,2), "
    "qty bigint, flag boolean, updated_at timestamp(3) without time zone, tier text)"
)
OS_TYPES = {
    "id": "keyword",
    "ts": "date_nanos",
    "label": "keyword",
    "amount": "double",
    "qty": "long",
    "flag": "boolean",
    "updated_at": "date",
    "tier": "keyword",
    "label_text": "text",
}
"""The type of each field of the data set's OpenSearch index."""


@dataclass(frozen=True)
class Row:
    """One row as Python holds it (updated_at is naive: PG stores it without time zone)."""

    id: str
    ts: datetime
    label: str | None
    amount: Decimal | None
    qty: int | None
    flag: bool | None
    updated_at: datetime | None
    tier: str

    def record(self) -> tuple[Any, ...]:
        """Return the row as a PG record in table column order."""
        return (
            self.id,
            self.ts,
            self.label,
            self.amount,
            self.qty,
            self.flag,
            self.updated_at,
            self.tier,
        )

    def doc(self) -> dict[str, Any]:
        """Return the row as an OpenSearch document (a NULL is a missing field)."""
        doc: dict[str, Any] = {
            "id": self.id,
            "ts": self.ts.isoformat(),
            "label": self.label,
            "amount": None if self.amount is None else float(self.amount),
            "qty": self.qty,
            "flag": self.flag,
            "tier": self.tier,
            "updated_at": None
            if self.updated_at is None
            else self.updated_at.replace(tzinfo=UTC).isoformat(timespec="milliseconds"),
        }
        return {k: v for k, v in doc.items() if v is not None}

    def hashes(self) -> tuple[str, int]:
        """Return (key_hash, row_hash) by the Python reference."""
        return _hashes(self)

    def with_label(self, label: str | None) -> Row:
        """Return a copy with another label."""
        return replace(self, label=label)


@functools.cache
def _hashes(row: Row) -> tuple[str, int]:
    """Hash a row once: every kind's test asks Python about the same rows."""
    return d.hash_row(
        row.id, "string", [row.label, row.amount, row.qty, row.flag, row.updated_at], TYPES
    )


def make_rows(seed: int = 20240310) -> list[Row]:
    """Return ROWS rows over five days plus ONLY_EXCLUDED tier-c rows on a sixth."""
    rnd = random.Random(seed)
    rows = []
    for i in range(ROWS):
        last = i >= ROWS - ONLY_EXCLUDED
        day0 = START + timedelta(days=5) if last else START
        span = 86_400 if last else 5 * 86_400
        ts = (
            day0 + timedelta(seconds=rnd.randrange(span), microseconds=rnd.randrange(1_000_000))
        ).astimezone(UTC)
        rows.append(
            Row(
                id=f"ключ😀{i}" if i % 50 == 0 else f"k{i:05d}",
                ts=ts,
                label=rnd.choice(LABELS) if rnd.random() < 0.5 else f"w{rnd.randrange(1000)}",
                amount=None
                if rnd.random() < 0.05
                else Decimal(rnd.randrange(-100_000, 10_000_000)) / 100,
                qty=rnd.choice([None, 0, -1, 2**62, -(2**62), rnd.randrange(-(10**9), 10**9)]),
                flag=rnd.choice([True, False, None]),
                updated_at=None
                if rnd.random() < 0.1
                else datetime(2024, 1, 1) + timedelta(milliseconds=rnd.randrange(10**10)),
                tier="c" if last else rnd.choice("aabbc"),
            )
        )
    return rows


def bucket_start(ts: datetime, granularity: str) -> datetime:
    """Return the start of the day or hour holding ts, in TZ."""
    local = ts.astimezone(TZ)
    if granularity == "day":
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    return local.replace(minute=0, second=0, microsecond=0)


def python_buckets(
    rows: Iterable[Row], granularity: str, reason: Callable[[Row], str | None] = lambda r: None
) -> list[BucketDigest]:
    """Return what a correct adapter answers for bucket_digests over rows."""
    hashed: dict[datetime, list[tuple[str, int]]] = defaultdict(list)
    excluded: dict[datetime, dict[str, int]] = defaultdict(dict)
    for r in rows:
        b = bucket_start(r.ts, granularity)
        why = reason(r)
        if why is None:
            hashed[b].append(r.hashes())
        else:
            excluded[b][why] = excluded[b].get(why, 0) + 1
    starts = sorted(set(hashed) | set(excluded))
    return [
        BucketDigest(start=s, agg=d.aggregate(hashed.get(s, [])), excluded=excluded.get(s, {}))
        for s in starts
    ]


def python_prefixes(
    rows: Iterable[Row], depth: int, within: list[str] | None = None
) -> dict[str, Aggregate]:
    """Return what a correct adapter answers for prefix_digests over rows."""
    groups: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for r in rows:
        kh, rh = r.hashes()
        if within is None or any(kh.startswith(p) for p in within):
            groups[kh[:depth]].append((kh, rh))
    return {p: d.aggregate(g) for p, g in sorted(groups.items())}


def python_rows(
    rows: Iterable[Row], prefixes: list[str] | None = None
) -> list[tuple[str, str, int, datetime]]:
    """Return the sorted (key, key_hash, row_hash, event_time) an adapter must yield."""
    out = []
    for r in rows:
        kh, rh = r.hashes()
        if prefixes is None or any(kh.startswith(p) for p in prefixes):
            out.append((r.id, kh, rh, r.ts))
    return sorted(out)


def pg_reason(r: Row) -> str | None:
    """Return the first exclusion rule a row matches (label IS NULL, then tier = 'c')."""
    if r.label is None:
        return "no_label"
    if r.tier == "c":
        return "tier_c"
    return None


def python_slots(
    rows: list[Row],
    start: datetime,
    end: datetime,
    seconds: int,
    reason: Callable[[Row], str | None] = lambda r: None,
) -> list[BucketDigest]:
    """Return what a correct adapter answers for slot_digests over rows."""
    step = timedelta(seconds=seconds)
    origin = start.astimezone(UTC)  # same-zone datetime arithmetic would be wall-clock
    hashed: dict[datetime, list[tuple[str, int]]] = defaultdict(list)
    excluded: dict[datetime, dict[str, int]] = defaultdict(dict)
    for r in rows:
        if not start <= r.ts < end:
            continue
        slot = origin + (r.ts - origin) // step * step
        why = reason(r)
        if why is None:
            hashed[slot].append(r.hashes())
        else:
            excluded[slot][why] = excluded[slot].get(why, 0) + 1
    return [
        BucketDigest(start=s, agg=d.aggregate(hashed.get(s, [])), excluded=excluded.get(s, {}))
        for s in sorted(set(hashed) | set(excluded))
    ]


def python_rows_in(
    rows: list[Row], ranges: list[tuple[datetime, datetime]], prefixes: list[str] | None = None
) -> list[tuple[str, str, int, datetime]]:
    """Return python_rows restricted to rows inside one of the sub-ranges."""
    inside = [r for r in rows if any(lo <= r.ts < hi for lo, hi in ranges)]
    return python_rows(inside, prefixes)


def python_tables(
    rows: Iterable[RowHash], width: int, tz: ZoneInfo
) -> dict[datetime, dict[int, iblt.Cell]]:
    """Return each local day's (UTC start's) difference-digest table, as encoding.iblt builds."""
    by_day: dict[datetime, list[tuple[int, int]]] = {}
    for r in rows:
        day = buckets.day_start(r.event_time, tz).astimezone(UTC)
        by_day.setdefault(day, []).append((r.row_hash, d.epoch_micros(r.event_time)))
    return {day: iblt.build(pairs, width) for day, pairs in by_day.items()}
