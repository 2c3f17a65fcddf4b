"""Buckets are absolute instants: 23- and 25-hour days and odd offsets, on real stores."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.config import Check, load_text
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.errors import ConfigError
from driftgauge.drill import drill_live
from driftgauge.encoding import digest as d
from driftgauge.engine import reconcile
from driftgauge.stores import open_adapter
from driftgauge.stores.base import BucketDigest, StoreAdapter
from tests.integration.conftest import OS_URL, TIMEOUT

pytestmark = pytest.mark.integration

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
        return f"{self.tz.split('/')[-1]}-{self.day}"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def span(self) -> tuple[datetime, datetime]:
        start = datetime(self.day.year, self.day.month, self.day.day, tzinfo=self.zone)
        nxt = self.day + timedelta(days=1)
        return start, datetime(nxt.year, nxt.month, nxt.day, tzinfo=self.zone)


CASES = [
    # Fall back: 02:00-03:00 happens twice; the drift is in the second (winter) one.
    Case("Europe/Berlin", date(2026, 10, 25), 25, datetime(2026, 10, 25, 1, 20, tzinfo=UTC),
         "2026-10-25T02:00:00+01:00"),
    # Spring forward: 02:00-03:00 does not happen.
    Case("Europe/Berlin", date(2026, 3, 29), 23, datetime(2026, 3, 29, 1, 20, tzinfo=UTC),
         "2026-03-29T03:00:00+02:00"),
    Case("Asia/Kathmandu", date(2026, 6, 10), 24, datetime(2026, 6, 9, 20, 30, tzinfo=UTC),
         "2026-06-10T02:00:00+05:45"),
    # Half-hour fall back at 02:00+11:00 to 01:30+10:30: a 24.5-hour day.
    Case("Australia/Lord_Howe", date(2026, 4, 5), 25, datetime(2026, 4, 4, 15, 10, tzinfo=UTC),
         "2026-04-05T01:30:00+10:30"),
    # Half-hour spring forward at 02:00+10:30 to 02:30+11:00: a 23.5-hour day.
    Case("Australia/Lord_Howe", date(2026, 10, 4), 24, datetime(2026, 10, 3, 16, 10, tzinfo=UTC),
         "2026-10-04T02:30:00+11:00"),
]


@dataclass(frozen=True)
class Row:
    id: str
    ts: datetime
    label: str

    def hashes(self) -> tuple[str, int]:
        return d.hash_row(self.id, "string", [self.label], ["string"])


def _rows() -> list[Row]:
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


def _damage(rows: list[Row]) -> list[Row]:
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


@dataclass
class Loaded:
    dsn: str
    index: str
    """The source's rows, undamaged."""
    reader_index: str
    """The reader's damaged copy."""
    dup_index: str
    """The damaged copy with one key held twice in the damaged hour."""
    rows: list[Row]

    def config(self, case: Case, reader: str, leaf_rows: int) -> Check:
        index = {"os-clean": self.index, "os-dup": self.dup_index}.get(reader,
                                                                       self.reader_index)
        table = "rdr_dup" if reader == "pg-dup" else "rdr"
        reader_view = (f"{{store: pg, table: {table}, key: id, time: ts}}"
                       if reader.startswith("pg")
                       else f"{{store: os, index: {index}, key: id, time: ts}}")
        text = f"""
stores:
  pg: {{kind: postgres, dsn: "{self.dsn}"}}
  os: {{kind: opensearch, url: "{OS_URL}"}}
state: {{dsn: "{self.dsn}"}}
checks:
  dst:
    source: {{store: pg, table: src, key: id, time: ts}}
    reader: {reader_view}
    fields: {{label: string}}
    timezone: {case.tz}
    settle: 0s
    drilldown: {{leaf_rows: {leaf_rows}}}
"""
        return load_text(text).checks["dst"]


@pytest.fixture(scope="module")
async def loaded(pg_database: str, os_client: AsyncOpenSearch,
                 os_index: Callable[[str], str]) -> AsyncIterator[Loaded]:
    rows = _rows()
    reader = _damage(rows)
    dup = reader + [r for r in reader if r.id.endswith("-h7")]
    conn = await asyncpg.connect(pg_database, timeout=TIMEOUT)
    try:
        for table, data in (("src", rows), ("rdr", reader), ("rdr_dup", dup)):
            await conn.execute(f"CREATE TABLE {table} (id text, ts timestamptz, label text)")
            await conn.copy_records_to_table(table, records=[(r.id, r.ts, r.label)
                                                             for r in data])
    finally:
        await conn.close()
    indexes = []
    for data in (rows, reader, dup):
        index = os_index("dg_dst")
        indexes.append(index)
        await os_client.indices.create(index=index, body={
            "settings": {"number_of_shards": 2, "number_of_replicas": 0},
            "mappings": {"properties": {"id": {"type": "keyword"}, "ts": {"type": "date"},
                                        "label": {"type": "keyword"}}}})
        await async_bulk(os_client, ({"_index": index, "_id": str(i), "_source": {
            "id": r.id, "ts": r.ts.isoformat(timespec="milliseconds"), "label": r.label}}
            for i, r in enumerate(data)), refresh=True, chunk_size=2000)
    yield Loaded(pg_database, indexes[0], indexes[1], indexes[2], rows)


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
    return sorted([(r.key, r.key_hash, r.row_hash, r.event_time.astimezone(UTC))
                   async for r in adapter.iter_rows(start, end)])


@pytest.mark.parametrize("store", ["pg", "os"])
@pytest.mark.parametrize("granularity", ["day", "hour", "slot", "prefix", "rows"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_adapters_bucket_by_absolute_instants(loaded: Loaded, case: Case,
                                                    granularity: str, store: str) -> None:
    check = loaded.config(case, "os-clean", 2000)
    view = check.source if store == "pg" else check.reader
    adapter = await open_adapter(view)
    try:
        got = await _ask(adapter, case, granularity)
    finally:
        await adapter.close()
    want = _reference(loaded.rows, case, granularity)
    assert got == want
    if granularity == "hour":
        assert len(got) == case.hours
        labels = [s.astimezone(case.zone).isoformat() for s, _ in got]
        assert len(set(labels)) == case.hours
        assert case.damaged_label in labels


@pytest.mark.parametrize("leaf_rows", [100, 5000], ids=["slots", "rows"])
@pytest.mark.parametrize("reader", ["pg", "os"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_drift_in_any_hour_is_found(loaded: Loaded, case: Case, reader: str,
                                          leaf_rows: int) -> None:
    check = loaded.config(case, reader, leaf_rows)
    source, rdr = await open_adapter(check.source), await open_adapter(check.reader)
    try:
        start, end = case.span()
        result = await reconcile(check, source, rdr, start, end, now=end + timedelta(days=1))
    finally:
        await source.close()
        await rdr.close()
    assert result.error is None
    (bucket,) = result.buckets
    assert (bucket.status, bucket.missing, bucket.extra, bucket.mismatched) == (
        "drift", 2, 1, 3), bucket.reasons
    differing = [n.label for n in bucket.tree if n.level == "hour" and n.differs]
    assert differing == [case.damaged_label]


@pytest.mark.parametrize("reader", ["pg-dup", "os-dup"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_a_key_held_twice_is_found_by_hour(loaded: Loaded, case: Case,
                                                 reader: str) -> None:
    check = loaded.config(case, reader, 100)
    source, rdr = await open_adapter(check.source), await open_adapter(check.reader)
    try:
        start, end = case.span()
        result = await reconcile(check, source, rdr, start, end, now=end + timedelta(days=1))
    finally:
        await source.close()
        await rdr.close()
    (bucket,) = result.buckets
    assert (bucket.status, bucket.missing, bucket.extra, bucket.mismatched,
            bucket.duplicates) == ("drift", 2, 1, 4, 1), bucket.reasons
    hours = [n for n in bucket.tree if n.level == "hour"]
    assert len(hours) == case.hours  # the hour queries saw every hour, repeated or short
    assert [n.label for n in hours if n.differs] == [case.damaged_label]


@pytest.mark.parametrize("reader", ["pg"])
async def test_drill_addresses_both_repeated_hours(loaded: Loaded, reader: str) -> None:
    case = CASES[0]
    check = loaded.config(case, reader, 5000)
    source, rdr = await open_adapter(check.source), await open_adapter(check.reader)
    try:
        day = await drill_live(check, source, rdr, case.day)
        labels = [n["label"] for n in day["nodes"]]
        assert len(labels) == 25 and len(set(labels)) == 25
        summer = await drill_live(check, source, rdr, case.day, "02:00+02:00")
        winter = await drill_live(check, source, rdr, case.day, "02:00+01:00")
        by_utc = await drill_live(check, source, rdr, case.day, "2026-10-25T01:00:00Z")
        with pytest.raises(ConfigError, match=r"02:00\+02:00.*02:00\+01:00"):
            await drill_live(check, source, rdr, case.day, "2")
        three = await drill_live(check, source, rdr, case.day, "3")
    finally:
        await source.close()
        await rdr.close()
    assert not summer["differs"] and winter["differs"]
    assert winter["start"] == "2026-10-25T02:00:00+01:00" == by_utc["start"]
    assert {k["key"] for k in winter["keys"]} == {
        f"{case.id}-h{i}" for i in range(5)} | {f"{case.id}-extra"}
    assert three["start"] == "2026-10-25T03:00:00+01:00"
