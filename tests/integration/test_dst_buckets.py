"""Drift in any hour of 23- and 25-hour days and odd offsets is found, on real stores.

How each kind buckets those days is in tests/conformance/test_dst.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError
from driftgauge.engine.live import drill_live
from tests.integration.conftest import OS_URL
from tests.integration.dst_data import CASES, Case, Row, damage, make_rows
from tests.integration.runs import adapters, reconcile_window
from tests.store_fixtures import PG_OS_STORES, load_index, pg_table

pytestmark = pytest.mark.integration


@dataclass
class Loaded:
    dsn: str
    reader_index: str
    """The reader's damaged copy."""
    dup_index: str
    """The damaged copy with one key held twice in the damaged hour."""
    rows: list[Row]

    def config(self, case: Case, reader: str, leaf_rows: int) -> Check:
        index = self.dup_index if reader == "os-dup" else self.reader_index
        table = "rdr_dup" if reader == "pg-dup" else "rdr"
        reader_view = (
            f"{{store: pg, table: {table}, key: id, time: ts}}"
            if reader.startswith("pg")
            else f"{{store: os, index: {index}, key: id, time: ts}}"
        )
        text = (
            PG_OS_STORES.format(dsn=self.dsn, os=OS_URL)
            + f"""\
  dst:
    source: {{store: pg, table: src, key: id, time: ts}}
    reader: {reader_view}
    fields: {{label: string}}
    timezone: {case.tz}
    settle: 0s
    drilldown: {{leaf_rows: {leaf_rows}}}
"""
        )
        return load_text(text).checks["dst"]


@pytest.fixture(scope="module")
async def loaded(
    pg_database: str, os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> AsyncIterator[Loaded]:
    rows = make_rows()
    reader = damage(rows)
    dup = reader + [r for r in reader if r.id.endswith("-h7")]
    for table, data in (("src", rows), ("rdr", reader), ("rdr_dup", dup)):
        records = [(r.id, r.ts, r.label) for r in data]
        await pg_table(pg_database, table, "id text, ts timestamptz, label text", records)
    indexes = []
    for data in (reader, dup):
        index = os_index("dg_dst")
        indexes.append(index)
        await load_index(
            os_client,
            index,
            {"id": "keyword", "ts": "date", "label": "keyword"},
            (
                # Numbered, not keyed by id: the duplicate copy holds one id twice.
                {
                    "_id": str(i),
                    "id": r.id,
                    "ts": r.ts.isoformat(timespec="milliseconds"),
                    "label": r.label,
                }
                for i, r in enumerate(data)
            ),
            shards=2,
            replicas=0,
            chunk_size=2000,
        )
    yield Loaded(pg_database, indexes[0], indexes[1], rows)


@pytest.mark.parametrize("leaf_rows", [100, 5000], ids=["slots", "rows"])
@pytest.mark.parametrize("reader", ["pg", "os"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_drift_in_any_hour_is_found(
    loaded: Loaded, case: Case, reader: str, leaf_rows: int
) -> None:
    check = loaded.config(case, reader, leaf_rows)
    result = await reconcile_window(check, *case.span())
    assert result.error is None
    (bucket,) = result.buckets
    assert (bucket.status, bucket.missing, bucket.extra, bucket.mismatched) == ("drift", 2, 1, 3), (
        bucket.reasons
    )
    differing = [n.label for n in bucket.tree if n.level == "hour" and n.differs]
    assert differing == [case.damaged_label]


@pytest.mark.parametrize("reader", ["pg-dup", "os-dup"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_a_key_held_twice_is_found_by_hour(loaded: Loaded, case: Case, reader: str) -> None:
    check = loaded.config(case, reader, 100)
    result = await reconcile_window(check, *case.span())
    (bucket,) = result.buckets
    assert (bucket.status, bucket.missing, bucket.extra, bucket.mismatched, bucket.duplicates) == (
        "drift",
        2,
        1,
        4,
        1,
    ), bucket.reasons
    hours = [n for n in bucket.tree if n.level == "hour"]
    assert len(hours) == case.hours  # the hour queries saw every hour, repeated or short
    assert [n.label for n in hours if n.differs] == [case.damaged_label]


@pytest.mark.parametrize("reader", ["pg"])
async def test_drill_addresses_both_repeated_hours(loaded: Loaded, reader: str) -> None:
    case = CASES[0]
    check = loaded.config(case, reader, 5000)
    async with adapters(check) as (source, rdr):
        day = await drill_live(check, source, rdr, case.day)
        labels = [n.label for n in day.nodes]
        assert len(labels) == 25 and len(set(labels)) == 25
        summer = await drill_live(check, source, rdr, case.day, "02:00+02:00")
        winter = await drill_live(check, source, rdr, case.day, "02:00+01:00")
        by_utc = await drill_live(check, source, rdr, case.day, "2026-10-25T01:00:00Z")
        with pytest.raises(ConfigError, match=r"02:00\+02:00.*02:00\+01:00"):
            await drill_live(check, source, rdr, case.day, "2")
        three = await drill_live(check, source, rdr, case.day, "3")
    assert not summer.differs and winter.differs
    assert winter.start == "2026-10-25T02:00:00+01:00" == by_utc.start
    assert {k.key for k in winter.keys} == {f"{case.id}-h{i}" for i in range(5)} | {
        f"{case.id}-extra"
    }
    assert three.start == "2026-10-25T03:00:00+01:00"
