"""An adapter wrapper that drops one row from leaf listings: a store whose rows and
aggregates disagree, which the engine must report, never average away."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from driftgauge.core.aggregate import Aggregate
from driftgauge.stores.base import (
    BucketDigest,
    Granularity,
    RowHash,
    SlotPass,
    StoreAdapter,
    TimeRanges,
)


class DropOneRow:
    """Delegate everything to `inner`, but leave the row of `key` out of iter_rows once."""

    def __init__(self, inner: StoreAdapter, key: str) -> None:
        self.inner = inner
        self.key = key
        self.dropped = 0

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        return await self.inner.bucket_digests(start, end, granularity)

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        return await self.inner.slot_digests(start, end, seconds, distinct=distinct)

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> SlotPass:
        inner: Any = self.inner
        result: SlotPass = await inner.day_and_slot_digests(start, end, seconds)
        return result

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        return await self.inner.prefix_digests(start, end, depth, within)

    async def iter_rows(
        self,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None = None,
        *,
        ranges: TimeRanges | None = None,
    ) -> AsyncIterator[RowHash]:
        async for r in self.inner.iter_rows(start, end, prefixes, ranges=ranges):
            if r.key == self.key and not self.dropped:
                self.dropped += 1
                continue
            yield r

    async def close(self) -> None:
        await self.inner.close()
