"""Every kind buckets by absolute instants: 23- and 25-hour days and odd offsets."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from driftgauge.core.aggregate import Aggregate
from driftgauge.encoding import digest as d
from driftgauge.stores.base import BucketDigest, StoreAdapter
from tests.conformance.spec import Kind, Spec, Store, Table
from tests.integration.dst_data import CASES, Case, Row, make_rows

pytestmark = pytest.mark.integration

ROWS = make_rows()
DST = Table(
    name="dst",
    columns=(("id", "key"), ("ts", "instant_ms"), ("label", "text")),
    rows=[(r.id, r.ts, r.label) for r in ROWS],
    shards=2,
)


def _day_start(moment: datetime, tz: ZoneInfo) -> datetime:
    local = moment.astimezone(tz).date()
    return datetime(local.year, local.month, local.day, tzinfo=tz).astimezone(UTC)


def _hour_start(moment: datetime, tz: ZoneInfo) -> datetime:
    """The reference: hours are whole hours of elapsed time from the local midnight."""
    day = _day_start(moment, tz)
    return day + timedelta(hours=(moment - day) // timedelta(hours=1))


def _reference(rows: list[Row], case: Case, granularity: str) -> Any:
    start, end = (t.astimezone(UTC) for t in case.span())
    inside = [r for r in rows if start <= r.ts < end]
    groups: dict[Any, list[tuple[str, int]]] = defaultdict(list)
    for r in inside:
        if granularity == "day":
            k: Any = _day_start(r.ts, case.zone)
        elif granularity == "hour":
            k = _hour_start(r.ts, case.zone)
        elif granularity == "slot":
            k = start + timedelta(seconds=900) * ((r.ts - start) // timedelta(seconds=900))
        elif granularity == "prefix":
            k = r.hashes()[0][:1]
        else:
            kh, rh = r.hashes()
            groups[(r.id, kh, rh, r.ts)].append((kh, rh))
            continue
        groups[k].append(r.hashes())
    if granularity == "rows":
        return sorted(groups)
    if granularity == "prefix":
        return {k: d.aggregate(v) for k, v in sorted(groups.items())}
    return [(k, d.aggregate(v)) for k, v in sorted(groups.items())]


async def _ask(adapter: StoreAdapter, case: Case, granularity: str) -> Any:
    start, end = case.span()

    def utc(buckets: list[BucketDigest]) -> list[tuple[datetime, Aggregate]]:
        return [(b.start.astimezone(UTC), b.agg) for b in buckets]

    if granularity in ("day", "hour"):
        return utc(await adapter.bucket_digests(start, end, granularity))  # type: ignore[arg-type]
    if granularity == "slot":
        return utc(await adapter.slot_digests(start, end, 900))
    if granularity == "prefix":
        return await adapter.prefix_digests(start, end, 1)
    return sorted(
        [
            (r.key, r.key_hash, r.row_hash, r.event_time.astimezone(UTC))
            async for r in adapter.iter_rows(start, end)
        ]
    )


Opener = Callable[[str], Awaitable[StoreAdapter]]


@pytest.fixture(scope="module")
async def adapter_in(kind: Kind, stored: Store) -> AsyncIterator[Opener]:
    """Yield a function returning the kind's adapter on the rows in a zone, opened once."""
    source = await stored(kind, DST)
    opened: dict[str, StoreAdapter] = {}

    async def open_in(tz: str) -> StoreAdapter:
        if tz not in opened:
            opened[tz] = await source.open(
                Spec(key="id", time="ts", tz=tz, fields={"label": ("label", "string")})
            )
        return opened[tz]

    try:
        yield open_in
    finally:
        for adapter in opened.values():
            await adapter.close()


@pytest.mark.parametrize("granularity", ["day", "hour", "slot", "prefix", "rows"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_adapters_bucket_by_absolute_instants(
    adapter_in: Opener, case: Case, granularity: str
) -> None:
    got = await _ask(await adapter_in(case.tz), case, granularity)
    want = _reference(ROWS, case, granularity)
    assert got == want
    if granularity == "hour":
        assert len(got) == case.hours
        labels = [s.astimezone(case.zone).isoformat() for s, _ in got]
        assert len(set(labels)) == case.hours
        assert case.damaged_label in labels
