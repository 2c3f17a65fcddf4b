"""The narrow Protocol every store adapter implements, and the values it returns."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable
from zoneinfo import ZoneInfo

from driftgauge.config.frozen import View
from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate

Granularity = Literal["day", "hour"]
NONE_EXCLUDED: Mapping[str, int] = MappingProxyType({})
"""One shared read-only empty mapping, so slot digests (1,440 a day) carry no dict each."""
TimeRanges = Sequence[tuple[datetime, datetime]]
"""Half-open [start, end) sub-ranges of event time, each bound timezone-aware."""
Spans = list[tuple[datetime, datetime]]
"""Sub-ranges after check_ranges: a list, every bound timezone-aware."""


@dataclass(frozen=True, slots=True)
class BucketDigest:
    """One time bucket's aggregate; `start` is the bucket's first instant, in UTC.

    Never a local wall-clock datetime: the two 02:00 hours of a day that falls back
    would compare and hash equal (see driftgauge.core.buckets).
    """

    start: datetime
    agg: Aggregate
    excluded: Mapping[str, int] = field(default_factory=lambda: NONE_EXCLUDED)
    """Source rows dropped on purpose in this bucket, by reason (empty for reader views)."""


@dataclass(frozen=True, slots=True)
class RowHash:
    """One row as the engine needs it at a leaf: its key, key hash and row hash."""

    key: str | None
    """The key's canonical text (an integer key is its decimal form); None: a NULL key."""
    key_hash: str
    """32 lowercase hex digits: md5 of the key's canonical encoding."""
    row_hash: int
    """Unsigned 64-bit hash of the row's canonical encoding."""
    event_time: datetime
    measures: Mapping[str, Decimal] | None = None
    """The row's measure values (the in-memory fake sums them; stores sum them inside)."""


@dataclass(frozen=True)
class SlotPass:
    """Day buckets and, from the same scan, each day's slots of expected rows."""

    days: list[BucketDigest]
    slots: Mapping[datetime, list[BucketDigest]]
    """Per day start (aware, as in `days`): its non-empty slots, excluded rows left out.

    An adapter may build a day's list only when it is looked up."""


class StoreAdapter(Protocol):
    """What the engine may ask of one side of a check; computed inside the store."""

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        """Return per-bucket aggregates of expected rows with event time in [start, end).

        Buckets are days in the view's time zone, or hours as driftgauge.core.buckets defines
        them (whole hours of elapsed time from local midnight), each keyed by its UTC
        start; buckets with no rows and no exclusions may be omitted.
        """
        ...

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        """Return aggregates grouped by the first `depth` hex digits of the key hash.

        Only rows in [start, end) whose key hash starts with one of `within` (when given)
        are counted; prefixes with no rows are omitted.
        """
        ...

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        """Return per-slot aggregates of expected rows in [start, end), slots aligned on start.

        With `distinct=False` the caller knows no key repeats in the range, so an adapter
        may report the row count as the distinct-key count and skip counting keys.

        Slots are consecutive spans of `seconds` (a divisor of 3600) of absolute time from
        `start` (aware, on a whole millisecond; see check_slot); each BucketDigest.start is
        its slot's first instant. Exclusions are counted per reason as in bucket_digests;
        slots with no rows and no exclusions may be omitted.
        """
        ...

    def iter_rows(
        self,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None = None,
        *,
        ranges: TimeRanges | None = None,
    ) -> AsyncIterator[RowHash]:
        """Yield the expected rows in [start, end), optionally only under key-hash prefixes.

        With `ranges`, only rows whose event time falls in one of those sub-ranges are
        yielded (an empty list yields nothing); prefixes and ranges combine with AND.
        """
        ...

    async def close(self) -> None:
        """Release pools and clients."""
        ...


class LazySlots(Mapping[datetime, list[BucketDigest]]):
    """First-pass slots per day, turned into digests only for the days looked up.

    Most days agree and their ~1,440 slots are never looked at; building objects for
    them would cost more client time than the scan's transfer.
    """

    def __init__(
        self, raw: Mapping[datetime, Any], build: Callable[[Any], list[BucketDigest]]
    ) -> None:
        self._raw = raw
        self._build = build

    def __getitem__(self, day: datetime) -> list[BucketDigest]:
        return self._build(self._raw[day])

    def __iter__(self) -> Iterator[datetime]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


@runtime_checkable
class SlotFirstPass(Protocol):
    """An adapter that can return day buckets and their slots from one scan."""

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> SlotPass:
        """Return day buckets as bucket_digests(start, end, "day") does, and their slots.

        Slots are spans of `seconds` aligned on `start` (rules as in slot_digests), cut at
        day boundaries; each carries the expected rows' count, distinct keys and digest.
        The distinct keys may be the count, as with slot_digests(distinct=False): slots
        are only compared on days where no key repeats.
        """
        ...


@dataclass(frozen=True)
class DigestPass:
    """Day buckets and, from the same scan, each day's difference digest (see encoding.iblt)."""

    days: list[BucketDigest]
    tables: Mapping[datetime, Mapping[int, tuple[int, int, int, int]]]
    """Per day start (aware, as in `days`): its non-zero cells over the expected rows."""


@runtime_checkable
class DigestFirstPass(Protocol):
    """An adapter that can return day buckets and their difference digests from one scan."""

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> DigestPass:
        """Return day buckets as bucket_digests(start, end, "day") does, and their tables.

        Each day's table has encoding.iblt.K sub-tables of `width` cells over the rows no
        rule excludes, computed exactly as encoding.iblt.build does.
        """
        ...


@runtime_checkable
class VocabularyCounter(Protocol):
    """An adapter that counts the expected rows per value of one of its columns."""

    async def value_counts(
        self, column: str, start: datetime, end: datetime
    ) -> dict[str | None, int]:
        """Return rows per value of `column` in [start, end), excluded rows left out.

        Values are their text (booleans as true/false, as a reader filter writes them);
        None counts the rows where the column is NULL.
        """
        ...


@runtime_checkable
class KeyQuery(Protocol):
    """An adapter that runs an operator's query returning one key of a time range."""

    async def query_key(self, query: str, start: datetime, end: datetime) -> str | None:
        """Return the first value `query` returns with the range's bounds, or None."""
        ...


SlotQuery = Callable[[datetime, datetime, int], Awaitable[list[BucketDigest]]]


async def hour_digests(
    slots: SlotQuery, start: datetime, end: datetime, tz: ZoneInfo
) -> list[BucketDigest]:
    """Return hour buckets of [start, end) from one-hour slots, one slot query per hour run.

    Every adapter answers `bucket_digests(..., "hour")` this way, so hours mean the same
    on every store: PostgreSQL's date_trunc and OpenSearch's calendar hours disagree with
    each other where a zone shifts by half an hour.
    """
    out: list[BucketDigest] = []
    for lo, hi in buckets.hour_runs(start, end, tz):
        for b in await slots(lo, hi, 3600):
            out.append(replace(b, start=buckets.hour_start(b.start, tz)))
    return sorted(out, key=lambda b: b.start)


def no_prefixes(start: datetime, end: datetime, depth: int, within: Sequence[str] | None) -> bool:
    """Check `depth`; return True when no prefix can hold rows (empty window or `within`)."""
    if not 1 <= depth <= 32:
        raise ValueError(f"depth must be between 1 and 32, got {depth}")
    return start >= end or (within is not None and not within)


def no_rows(
    start: datetime, end: datetime, prefixes: Sequence[str] | None, spans: TimeRanges | None
) -> bool:
    """Return True when a row export yields nothing: empty window, prefixes or sub-ranges."""
    return start >= end or (prefixes is not None and not prefixes) or spans == []


def check_slot(start: datetime, seconds: int) -> timedelta:
    """Return the slot length after checking `seconds` and the slots' origin `start`."""
    whole = isinstance(seconds, int) and not isinstance(seconds, bool)
    if not whole or seconds < 1 or 3600 % seconds:
        raise ValueError(f"seconds must be a whole divisor of 3600, got {seconds!r}")
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware")
    # OpenSearch places slots with a millisecond offset; finer origins cannot align.
    if start.microsecond % 1000:
        raise ValueError(f"start must fall on a whole millisecond, got {start.isoformat()}")
    return timedelta(seconds=seconds)


def check_ranges(ranges: TimeRanges) -> Spans:
    """Return the sub-ranges, every bound checked timezone-aware, as disjoint sorted spans.

    Overlapping and touching ranges are merged and empty ones dropped: the union is the
    same, and a kind that must split a long list over several queries (OpenSearch caps
    the clauses of one) then reads each row once.
    """
    given = list(ranges)
    for i, (lo, hi) in enumerate(given):
        if lo.tzinfo is None or hi.tzinfo is None:
            raise ValueError(f"ranges[{i}] bounds must be timezone-aware")
    out: list[tuple[datetime, datetime]] = []
    for lo, hi in sorted((lo, hi) for lo, hi in given if lo < hi):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


class ReadAdapter:
    """The base of the store adapters: what they all do alike around their own queries.

    An empty window answers nothing, hours come from one-hour slots (hour_digests), and a
    row export checks its sub-ranges and asks the store nothing when no row can match. A
    kind answers `_day_digests`, `slot_digests` and `_rows`.
    """

    view: View

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        """Return per-bucket aggregates of expected rows and excluded counts by reason."""
        if start >= end:
            return []
        if granularity == "hour":
            return await hour_digests(self.slot_digests, start, end, self.view.timezone)
        return await self._day_digests(start, end, granularity)

    async def _day_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        """Return the day buckets of a non-empty window, excluded counts by reason."""
        raise NotImplementedError

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        """Return per-slot aggregates and excluded counts by reason."""
        raise NotImplementedError

    async def iter_rows(
        self,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None = None,
        *,
        ranges: TimeRanges | None = None,
    ) -> AsyncIterator[RowHash]:
        """Yield the expected rows the kind exports, asking nothing when none can match."""
        spans = None if ranges is None else check_ranges(ranges)
        if no_rows(start, end, prefixes, spans):
            return
        async for row in self._rows(start, end, prefixes, spans):
            yield row

    def _rows(
        self, start: datetime, end: datetime, prefixes: Sequence[str] | None, spans: Spans | None
    ) -> AsyncIterator[RowHash]:
        """Yield the rows of a non-empty export (prefixes and spans, if given, non-empty)."""
        raise NotImplementedError
