"""Both sides of one check, each counting its round trips, fetched and scanned rows."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar
from zoneinfo import ZoneInfo

from driftgauge import observe
from driftgauge.config.frozen import Check, Store
from driftgauge.core.aggregate import Aggregate
from driftgauge.engine.split import merge_digests, merge_first, split_days
from driftgauge.engine.tasks import all_or_none
from driftgauge.slots import store_slot
from driftgauge.stores.base import (
    BucketDigest,
    DigestFirstPass,
    DigestPass,
    Granularity,
    RowHash,
    SlotFirstPass,
    SlotPass,
    StoreAdapter,
)

# Slot length of the first pass: divides every hour and lines up with any whole-minute
# day start, so the slots of a day agree whichever side computed them.
FIRST_PASS_SLOT = 60
T = TypeVar("T")


class Counted:
    """Wrap an adapter to count round trips and fetched rows for the run's report and /metrics."""

    def __init__(
        self,
        inner: StoreAdapter,
        store: str,
        max_queries: int | None = None,
        *,
        parallel: int = 1,
        zone: ZoneInfo | None = None,
    ) -> None:
        self.inner = inner
        self.store = store
        """The configured store's name, for the process's store-call metrics."""
        self.max_queries = max_queries
        """The store's query slots in this replica (None: no limit); see driftgauge.slots."""
        self.parallel = parallel
        """Range queries of whole days (in `zone`) a first pass is split into (see split)."""
        self.zone = zone
        self.queries = 0
        self.rows = 0
        self.scanned = 0
        """Rows the store digested or returned for this run (see _scan)."""
        self.seconds = 0.0
        """Time spent waiting on this store, summed over concurrent calls."""

    @asynccontextmanager
    async def _timed(self, operation: str) -> AsyncIterator[None]:
        """Count one call, add its wait to `seconds` and record it for /metrics.

        The call first takes one of its store's query slots; the time waiting for it is
        the run's (in `seconds`), not the store's (not in the store-call histogram).
        """
        self.queries += 1
        t0 = time.perf_counter()
        try:
            async with store_slot(self.store, self.max_queries):
                with observe.store_call(self.store, operation):
                    yield
        finally:
            self.seconds += time.perf_counter() - t0

    def _scan(self, operation: str, rows: int) -> None:
        """Count rows a call digested (excluded ones too: the store read them) or returned."""
        self.scanned += rows
        observe.ROWS_SCANNED.add((self.store, operation), rows)

    async def buckets(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        async with self._timed("digests"):
            out = await self.inner.bucket_digests(start, end, granularity)
        self._scan("digests", _rows_in(out))
        return out

    def _parts(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """Return the range queries a first pass over [start, end) is split into."""
        if self.parallel < 2 or self.zone is None:
            return [(start, end)]
        return split_days(start, end, self.zone, self.parallel, FIRST_PASS_SLOT)

    async def first_pass(
        self, start: datetime, end: datetime, with_slots: bool
    ) -> tuple[SlotPass, bool]:
        """Return the day buckets, with their slots when asked and the store can.

        With `parallel` above 1 the window's days are scanned as that many range queries
        at once (each takes its own query slot), merged into one first pass.
        """
        parts = self._parts(start, end)
        if len(parts) > 1:
            got = await all_or_none(*(self._first_part(a, b, with_slots) for a, b in parts))
            return merge_first(got)
        return await self._first_part(start, end, with_slots)

    async def _first_part(
        self, start: datetime, end: datetime, with_slots: bool
    ) -> tuple[SlotPass, bool]:
        """Return one range query's day buckets, with their slots when asked and the store can."""
        async with self._timed("digests"):
            if with_slots and isinstance(self.inner, SlotFirstPass):
                got = await self.inner.day_and_slot_digests(start, end, FIRST_PASS_SLOT), True
            else:
                got = SlotPass(await self.inner.bucket_digests(start, end, "day"), {}), False
        # The slots come from the same scan as the days: their rows are not read again.
        self._scan("digests", _rows_in(got[0].days))
        return got

    async def digest_pass(self, start: datetime, end: datetime, width: int) -> DigestPass:
        """Return the day buckets and their difference digests (split as first_pass is)."""
        parts = self._parts(start, end)
        if len(parts) > 1:
            return merge_digests(
                await all_or_none(*(self._digest_part(a, b, width) for a, b in parts))
            )
        return await self._digest_part(start, end, width)

    async def _digest_part(self, start: datetime, end: datetime, width: int) -> DigestPass:
        """Return one range query's day buckets and their difference digests."""
        assert isinstance(self.inner, DigestFirstPass)
        async with self._timed("digests"):
            got = await self.inner.day_and_cell_digests(start, end, width)
        # The digests come from the same scan as the days: their rows count once.
        self._scan("digests", _rows_in(got.days))
        return got

    async def prefixes(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None
    ) -> dict[str, Aggregate]:
        async with self._timed("prefixes"):
            out = await self.inner.prefix_digests(start, end, depth, within)
        self._scan("prefixes", sum(a.count for a in out.values()))
        return out

    async def slots(self, start: datetime, end: datetime, seconds: int) -> list[BucketDigest]:
        async with self._timed("slots"):
            # Only asked of days where no key repeats: keys need not be counted again.
            out = await self.inner.slot_digests(start, end, seconds, distinct=False)
        self._scan("slots", _rows_in(out))
        return out

    async def rows_into(
        self,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None,
        ranges: Sequence[tuple[datetime, datetime]] | None,
        sink: Callable[[RowHash], None],
    ) -> None:
        """Hand each row of [start, end) (within key-hash prefixes or time sub-ranges) to `sink`."""
        got = 0
        async with self._timed("rows"):
            rows = (
                self.inner.iter_rows(start, end, prefixes)
                if ranges is None
                else self.inner.iter_rows(start, end, prefixes, ranges=ranges)
            )
            async for row in rows:
                sink(row)
                got += 1
        self.rows += got
        self._scan("rows", got)


def _rows_in(buckets: Sequence[BucketDigest]) -> int:
    """Return the rows a list of bucket digests covers, excluded rows included."""
    return sum(b.agg.count + sum(b.excluded.values()) for b in buckets)


@dataclass
class Sides:
    """Both sides of one check, each counting its calls."""

    check: Check
    source: Counted
    reader: Counted

    @classmethod
    def of(cls, check: Check, source: StoreAdapter, reader: StoreAdapter) -> Sides:
        """Return the check's two adapters, counted under their configured stores' names."""

        def counted(adapter: StoreAdapter, store: Store) -> Counted:
            return Counted(
                adapter,
                store.name,
                store.max_concurrent_queries,
                parallel=store.parallel_scans,
                zone=check.timezone,
            )

        return cls(check, counted(source, check.source.store), counted(reader, check.reader.store))

    async def both(self, fn: Callable[[Counted], Awaitable[T]]) -> tuple[T, T]:
        """Run the same request on both sides concurrently."""
        s, r = await all_or_none(fn(self.source), fn(self.reader))
        return s, r

    def digests(self) -> bool:
        """Return True when both sides return difference digests in their first pass."""
        return isinstance(self.source.inner, DigestFirstPass) and isinstance(
            self.reader.inner, DigestFirstPass
        )


def utc(moment: datetime) -> datetime:
    """Return `moment` in UTC, the key every per-day and per-slot map is held under."""
    return moment.astimezone(UTC)
