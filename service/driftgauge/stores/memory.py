"""An in-memory store adapter over pre-hashed rows, for engine tests and dry runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate
from driftgauge.encoding import iblt
from driftgauge.encoding.digest import epoch_micros
from driftgauge.stores.base import (
    BucketDigest,
    DigestPass,
    Granularity,
    RowHash,
    SlotPass,
    check_ranges,
    check_slot,
    hour_digests,
)

MOD = 1 << 64


def aggregate(rows: Iterable[RowHash], measures: Sequence[str] = ()) -> Aggregate:
    """Return count, distinct keys and digest of rows, and the totals of `measures`."""
    count, digest, keys = 0, 0, set()
    totals = dict.fromkeys(measures, Decimal(0))
    for r in rows:
        count += 1
        digest = (digest + r.row_hash) % MOD
        keys.add(r.key)
        for name in measures:
            value = (r.measures or {}).get(name)
            if value is not None:
                totals[name] += value
    return Aggregate(count, len(keys), digest, totals if measures else None)


def _day(moment: datetime, tz: ZoneInfo) -> datetime:
    return buckets.day_start(moment, tz)


@dataclass
class MemoryAdapter:
    """A StoreAdapter over a list of rows; `excluded` holds (event time, reason) pairs."""

    rows: list[RowHash]
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    excluded: list[tuple[datetime, str]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    fail_with: Exception | None = None
    measures: tuple[str, ...] = ()
    """Measures every day, hour and slot bucket sums from the rows' values."""

    def _check(self, call: str) -> None:
        self.calls.append(call)
        if self.fail_with is not None:
            raise self.fail_with

    def _in(
        self, start: datetime, end: datetime, prefixes: Sequence[str] | None = None
    ) -> list[RowHash]:
        out = [r for r in self.rows if start <= r.event_time < end]
        if prefixes is not None:
            out = [r for r in out if r.key_hash.startswith(tuple(prefixes))]
        return out

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        """Return per-bucket aggregates computed from the rows in memory."""
        self._check(f"buckets:{granularity}")
        if granularity == "hour":
            return await hour_digests(self._slots, start, end, self.timezone)
        return self._grouped(start, end, lambda when: _day(when, self.timezone))

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        """Return aggregates per slot of `seconds` aligned on `start`."""
        self._check(f"slots:{seconds}")
        return await self._slots(start, end, seconds)

    async def _slots(self, start: datetime, end: datetime, seconds: int) -> list[BucketDigest]:
        step = check_slot(start, seconds)
        origin = start.astimezone(UTC)  # slots are elapsed time: add in UTC, not wall clock

        return self._grouped(start, end, lambda when: origin + step * ((when - origin) // step))

    def _grouped(
        self, start: datetime, end: datetime, bucket_of: Callable[[datetime], datetime]
    ) -> list[BucketDigest]:
        """Return the digests of the rows and excluded counts in [start, end) per bucket."""
        groups: dict[datetime, list[RowHash]] = {}
        for r in self._in(start, end):
            groups.setdefault(bucket_of(r.event_time), []).append(r)
        excl: dict[datetime, dict[str, int]] = {}
        for when, reason in self.excluded:
            if start <= when < end:
                per = excl.setdefault(bucket_of(when), {})
                per[reason] = per.get(reason, 0) + 1
        return [
            BucketDigest(k, aggregate(groups.get(k, []), self.measures), excl.get(k, {}))
            for k in sorted(groups.keys() | excl.keys())
        ]

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> SlotPass:
        """Return day buckets and each day's slots aligned on `start`."""
        days = await self.bucket_digests(start, end, "day")
        self.calls[-1] = f"days+slots:{seconds}"
        step = check_slot(start, seconds)
        origin = start.astimezone(UTC)
        groups: dict[datetime, dict[datetime, list[RowHash]]] = {}
        for r in self._in(start, end):
            day = _day(r.event_time, self.timezone)
            slot = origin + step * ((r.event_time - origin) // step)
            groups.setdefault(day, {}).setdefault(slot, []).append(r)
        return SlotPass(
            days,
            {
                day: [BucketDigest(k, aggregate(rs)) for k, rs in sorted(per.items())]
                for day, per in groups.items()
            },
        )

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        """Return aggregates grouped by key-hash prefix."""
        self._check(f"prefixes:{depth}")
        groups: dict[str, list[RowHash]] = {}
        for r in self._in(start, end, within):
            groups.setdefault(r.key_hash[:depth], []).append(r)
        return {p: aggregate(rs) for p, rs in groups.items()}

    async def iter_rows(
        self,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None = None,
        *,
        ranges: Sequence[tuple[datetime, datetime]] | None = None,
    ) -> AsyncIterator[RowHash]:
        """Yield the rows in the range (optionally only under prefixes or in sub-ranges)."""
        self._check("rows")
        bounds = None if ranges is None else check_ranges(ranges)
        for r in self._in(start, end, prefixes):
            if bounds is None or any(s <= r.event_time < e for s, e in bounds):
                yield r

    async def close(self) -> None:
        """Nothing to release."""


@dataclass
class DigestMemoryAdapter(MemoryAdapter):
    """The in-memory adapter with difference digests in its first pass."""

    widest_digest = iblt.DAY_WIDTH

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> DigestPass:
        """Return day buckets and each day's difference digest of `width`-cell sub-tables."""
        days = await self.bucket_digests(start, end, "day")
        self.calls[-1] = f"days+cells:{width}"
        groups: dict[datetime, list[tuple[int, int]]] = {}
        for r in self._in(start, end):
            day = _day(r.event_time, self.timezone)
            groups.setdefault(day, []).append((r.row_hash, epoch_micros(r.event_time)))
        return DigestPass(days, {day: iblt.build(rs, width) for day, rs in groups.items()})
