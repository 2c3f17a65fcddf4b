"""Sub-hour slot digests and row fetches by time sub-range, on the real stores."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.config.runtime import Exclusion, View
from driftgauge.encoding import digest as d
from driftgauge.stores import open_adapter
from driftgauge.stores.base import BucketDigest, SlotFirstPass, StoreAdapter
from driftgauge.stores.opensearch import requests as rq
from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from driftgauge.stores.postgres import dialect as pg_sql
from tests.integration import dataset as ds
from tests.integration.conftest import TIMEOUT, make_view, os_store, pg_store

pytestmark = pytest.mark.integration

WINDOW = (ds.START, ds.END)
DST_DAY = (datetime(2024, 3, 10, tzinfo=ds.TZ), datetime(2024, 3, 11, tzinfo=ds.TZ))
"""A local day of 23 hours, starting at 05:00 UTC."""
ODD = (datetime(2024, 3, 9, 13, 37, 42, 123000, tzinfo=ds.TZ),
       datetime(2024, 3, 11, 2, 0, tzinfo=ds.TZ))
"""A window whose start is on no round UTC boundary and that crosses two local midnights."""
STEP = timedelta(minutes=4)
_FIRST, _DST = ds.START.astimezone(UTC), DST_DAY[0].astimezone(UTC)
RANGES = [
    (_FIRST + 5 * STEP, _FIRST + 6 * STEP),
    (_FIRST + 6 * STEP, _FIRST + 7 * STEP),  # adjacent to the first
    (_DST + timedelta(hours=1), _DST + timedelta(hours=3)),  # 01:00 EST to 04:00 EDT
    (_DST + timedelta(hours=2, minutes=30), _DST + timedelta(hours=2, minutes=50)),
    (ds.END - timedelta(days=2, minutes=10), ds.END - timedelta(days=2, minutes=6)),
]
"""Sub-ranges of WINDOW on three days; the fourth lies inside the third."""
PG_RULES = (Exclusion("no_label", where="label IS NULL"), Exclusion("tier_c", where="tier = 'c'"))
OS_RULES = (Exclusion("no_label", query={"bool": {"must_not": {"exists": {"field": "label"}}}}),
            Exclusion("tier_c", query={"term": {"tier": "c"}}))


@dataclass
class Stores:
    """The data set in a PG table (with a time index) and an OS index, adapters on each."""

    dsn: str
    index: str
    rows: list[ds.Row]
    pg: StoreAdapter
    os: StoreAdapter

    def pg_view(self, **kw: Any) -> View:
        """Return a view on the PG table with the data set's fields."""
        return make_view(pg_store(self.dsn), key="id", time="ts", tz=ds.TZ.key,
                         fields=ds.FIELDS, table="items", **kw)

    def os_view(self, **kw: Any) -> View:
        """Return a view on the OS index with the data set's fields."""
        return make_view(os_store(), key="id", time="ts", tz=ds.TZ.key, fields=ds.FIELDS,
                         index=self.index, **kw)


@pytest.fixture(scope="module")
async def stores(pg_database: str, os_client: AsyncOpenSearch,
                 os_index: Callable[[str], str]) -> AsyncIterator[Stores]:
    """Load the data set into both stores (OS with 3 shards) and open an adapter on each."""
    rows = ds.make_rows()
    conn = await asyncpg.connect(pg_database, timeout=TIMEOUT)
    try:
        await conn.execute(ds.PG_DDL)
        await conn.copy_records_to_table("items", records=[r.record() for r in rows],
                                         timeout=TIMEOUT)
        await conn.execute("CREATE INDEX items_ts_idx ON items (ts); ANALYZE items")
    finally:
        await conn.close()
    index = os_index("dg_slots")
    await os_client.indices.create(index=index, body={
        "settings": {"number_of_shards": 3, "number_of_replicas": 0},
        "mappings": ds.OS_MAPPING})
    await async_bulk(os_client, ({"_index": index, "_id": r.id, "_source": r.doc()}
                                 for r in rows), refresh=True, chunk_size=2000)
    data = Stores(pg_database, index, rows, pg=None, os=None)  # type: ignore[arg-type]
    data.pg = await open_adapter(data.pg_view())
    data.os = await open_adapter(data.os_view())
    try:
        yield data
    finally:
        await data.pg.close()
        await data.os.close()


def python_slots(rows: list[ds.Row], start: datetime, end: datetime, seconds: int,
                 reason: Callable[[ds.Row], str | None] = lambda r: None) -> list[BucketDigest]:
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
    return [BucketDigest(start=s, agg=d.aggregate(hashed.get(s, [])), excluded=excluded.get(s, {}))
            for s in sorted(set(hashed) | set(excluded))]


def python_rows_in(rows: list[ds.Row], ranges: list[tuple[datetime, datetime]],
                   prefixes: list[str] | None = None) -> list[tuple[str, str, int, datetime]]:
    """Return ds.python_rows restricted to rows inside one of the sub-ranges."""
    inside = [r for r in rows if any(lo <= r.ts < hi for lo, hi in ranges)]
    return ds.python_rows(inside, prefixes)


async def _rows(adapter: StoreAdapter, ranges: list[tuple[datetime, datetime]],
                prefixes: list[str] | None = None) -> list[Any]:
    return sorted([(r.key, r.key_hash, r.row_hash, r.event_time)
                   async for r in adapter.iter_rows(*WINDOW, prefixes, ranges=ranges)])


@pytest.mark.parametrize("seconds", [300, 240, 900])
@pytest.mark.parametrize("window", [DST_DAY, ODD], ids=["dst_day", "odd_start"])
async def test_slots_agree_with_python(stores: Stores, seconds: int,
                                       window: tuple[datetime, datetime]) -> None:
    want = python_slots(stores.rows, *window, seconds)
    assert await stores.pg.slot_digests(*window, seconds) == want
    assert await stores.os.slot_digests(*window, seconds) == want
    start, end = (w.astimezone(UTC) for w in window)
    assert all((b.start.astimezone(UTC) - start) % timedelta(seconds=seconds) == timedelta(0)
               for b in want)
    assert want[0].start >= start and want[-1].start < end
    # Python's rows are spread over the whole window; most slots hold some.
    assert len(want) > 0.9 * ((end - start) // timedelta(seconds=seconds))


@pytest.mark.parametrize("seconds", [300, 240, 900])
async def test_slots_sum_to_the_day(stores: Stores, seconds: int) -> None:
    (day,) = await stores.pg.bucket_digests(*DST_DAY, "day")
    for adapter in (stores.pg, stores.os):
        slots = await adapter.slot_digests(*DST_DAY, seconds)
        assert sum(s.agg.count for s in slots) == day.agg.count > 0
        assert sum(s.agg.distinct_keys for s in slots) == day.agg.distinct_keys
        assert sum(s.agg.digest for s in slots) % 2**64 == day.agg.digest
    assert len(slots) <= 23 * 3600 // seconds


async def test_hour_slots_are_the_hour_buckets(stores: Stores) -> None:
    hours = await stores.pg.bucket_digests(*DST_DAY, "hour")
    assert len(hours) == 23
    assert await stores.pg.slot_digests(*DST_DAY, 3600) == hours
    assert await stores.os.slot_digests(*DST_DAY, 3600) == hours


async def test_slots_count_exclusions_by_reason(stores: Stores) -> None:
    window = (ODD[0], ds.END)  # includes the day only excluded rows fall on
    want = python_slots(stores.rows, *window, 900, ds.pg_reason)
    for view in (stores.pg_view(exclusions=PG_RULES), stores.os_view(exclusions=OS_RULES)):
        adapter = await open_adapter(view)
        try:
            assert await adapter.slot_digests(*window, 900) == want
        finally:
            await adapter.close()
    assert any(b.agg.count == 0 and b.excluded for b in want)
    assert {"no_label", "tier_c"} <= {k for b in want for k in b.excluded}
    in_window = sum(window[0] <= r.ts < window[1] for r in stores.rows)
    assert sum(b.agg.count + sum(b.excluded.values()) for b in want) == in_window


async def test_opensearch_slot_chunks_cut_on_slot_bounds(stores: Stores) -> None:
    assert isinstance(stores.os, OpenSearchAdapter)
    chunked = OpenSearchAdapter(stores.os_view(), stores.os._client, max_chunk_rows=500)
    counts = [(int(b.start.timestamp() * 1000), b.agg.count)
              for b in ds.python_buckets(stores.rows, "day")]
    for seconds in (240, 60):
        chunks = rq.plan_slot_chunks(*ODD, counts, 500, seconds)
        # Local midnights are off the grid of ODD's start; 60 s slots exceed a request's cap.
        assert len(chunks) >= (3 if seconds == 240 else 4)
        for chunk in chunks:
            offset = chunk.start.astimezone(UTC) - ODD[0].astimezone(UTC)
            assert offset % timedelta(seconds=seconds) == timedelta(0)
            assert chunk.end - chunk.start <= timedelta(seconds=seconds * 1000)
        assert await chunked.slot_digests(*ODD, seconds) == python_slots(stores.rows, *ODD,
                                                                         seconds)


@pytest.mark.parametrize("prefixes", [None, ["f", "01", "a"]])
async def test_iter_rows_only_in_ranges(stores: Stores, prefixes: list[str] | None) -> None:
    want = python_rows_in(stores.rows, RANGES, prefixes)
    assert await _rows(stores.pg, RANGES, prefixes) == want
    assert await _rows(stores.os, RANGES, prefixes) == want
    everything = ds.python_rows(stores.rows, prefixes)
    assert 0 < len(want) < len(everything) / 10
    assert len({w[0] for w in want}) == len(want)  # overlapping sub-ranges yield a row once
    assert await _rows(stores.pg, []) == []
    assert await _rows(stores.os, []) == []


async def test_exclusions_stay_out_of_ranged_rows(stores: Stores) -> None:
    kept = [r for r in stores.rows if ds.pg_reason(r) is None]
    want = python_rows_in(kept, RANGES)
    for view in (stores.pg_view(exclusions=PG_RULES), stores.os_view(exclusions=OS_RULES)):
        adapter = await open_adapter(view)
        try:
            assert await _rows(adapter, RANGES) == want
        finally:
            await adapter.close()
    assert 0 < len(want) < len(python_rows_in(stores.rows, RANGES))


async def test_ranged_rows_use_the_time_index(stores: Stores) -> None:
    sql = pg_sql.rows_sql(stores.pg_view(), within=False, ranges=len(RANGES))
    conn = await asyncpg.connect(stores.dsn, timeout=TIMEOUT,
                                 server_settings={"TimeZone": "UTC"})
    try:
        plan = "\n".join(r[0] for r in await conn.fetch(
            f"EXPLAIN {sql}", *WINDOW, [lo for lo, _ in RANGES], [hi for _, hi in RANGES],
            timeout=TIMEOUT))
    finally:
        await conn.close()
    assert "Seq Scan" not in plan
    assert plan.count("items_ts_idx") >= len(RANGES)


@pytest.mark.parametrize("seconds", [0, -240, 7, 7200, 86_400])
async def test_slot_seconds_must_divide_an_hour(stores: Stores, seconds: int) -> None:
    for adapter in (stores.pg, stores.os):
        with pytest.raises(ValueError, match="seconds must be a whole divisor of 3600"):
            await adapter.slot_digests(*DST_DAY, seconds)


async def test_slot_and_range_bounds_must_be_aware(stores: Stores) -> None:
    naive = (datetime(2024, 3, 9), datetime(2024, 3, 10))
    for adapter in (stores.pg, stores.os):
        with pytest.raises(ValueError, match="seconds must be a whole divisor"):
            await adapter.slot_digests(*DST_DAY, 240.0)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"ranges\[1\] bounds must be timezone-aware"):
            _ = [r async for r in adapter.iter_rows(*WINDOW, ranges=[RANGES[0], naive])]
        with pytest.raises(ValueError, match="whole millisecond"):
            await adapter.slot_digests(DST_DAY[0] + timedelta(microseconds=5), DST_DAY[1], 240)


async def test_first_pass_slots_are_each_days_slot_query(stores: Stores) -> None:
    window = (DST_DAY[0] - timedelta(days=1), DST_DAY[1] + timedelta(days=1))
    days = [window[0] + timedelta(days=i) for i in range(3)]
    days = [datetime(d.year, d.month, d.day, tzinfo=ds.TZ) for d in days]
    pg = await open_adapter(stores.pg_view(exclusions=PG_RULES))
    os_ = await open_adapter(stores.os_view(exclusions=OS_RULES))
    try:
        for adapter in (pg, os_):
            assert isinstance(adapter, SlotFirstPass)
            first = await adapter.day_and_slot_digests(*window, 60)
            assert first.days == await pg.bucket_digests(*window, "day")
            assert sorted(first.slots) == days
            for start, end in zip(days, [*days[1:], window[1]], strict=True):
                # Only expected rows are in first-pass slots; slots of excluded rows go.
                want = [BucketDigest(b.start, b.agg)
                        for b in python_slots(stores.rows, start, end, 60, ds.pg_reason)
                        if b.agg.count]
                assert first.slots[start] == want
                # Either store's slot query of the day lines up slot for slot.
                assert [BucketDigest(b.start, b.agg) for b in
                        await os_.slot_digests(start, end, 60) if b.agg.count] == want
            day_total = next(b.agg for b in first.days if b.start == DST_DAY[0])
            dst_slots = first.slots[DST_DAY[0]]
            assert sum(s.agg.count for s in dst_slots) == day_total.count > 0
            assert sum(s.agg.digest for s in dst_slots) % 2**64 == day_total.digest
    finally:
        await pg.close()
        await os_.close()


async def test_opensearch_first_pass_in_chunks_and_without_rules(stores: Stores) -> None:
    assert isinstance(stores.os, OpenSearchAdapter)
    chunked = OpenSearchAdapter(stores.os_view(), stores.os._client, max_chunk_rows=500)
    window = (ODD[0].replace(second=0, microsecond=0), ds.END)
    first = await chunked.day_and_slot_digests(*window, 60)
    assert first.days == await stores.pg.bucket_digests(*window, "day")
    want = python_slots(stores.rows, *window, 60)
    got = sorted((s for day in first.slots for s in first.slots[day]), key=lambda b: b.start)
    assert got == want
