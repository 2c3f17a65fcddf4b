"""PostgreSQL's difference digests: the SQL builds the tables encoding.iblt builds, and peels.

The data set has a DST day, exclusion rules and rows a rule drops entirely on one day.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.core.fields import RowHashName
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.base import DigestFirstPass
from driftgauge.stores.postgres.adapter import PostgresAdapter
from tests.conformance import kind_postgres
from tests.conformance.items import RULES, SPEC
from tests.conformance.kind_postgres import PostgresSource
from tests.integration import dataset as ds
from tests.integration.conftest import TIMEOUT
from tests.integration.pg_items import items_table
from tests.integration.runs import adapters, opened

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def stores() -> AsyncIterator[PostgresSource]:
    """Yield the items in a PG table with a time index."""
    async with items_table() as source:
        yield source


@pytest.mark.parametrize(("width", "row_hash"), [(16, "md5"), (101, "lookup3"), (16384, "lookup3")])
async def test_the_sql_builds_the_tables_python_builds(
    stores: PostgresSource, width: int, row_hash: RowHashName
) -> None:
    view = kind_postgres.view(stores.dsn, replace(SPEC, exclusions=RULES), "items")
    view = replace(view, row_hash=row_hash)
    async with opened(view) as adapter:
        assert isinstance(adapter, DigestFirstPass)
        got = await adapter.day_and_cell_digests(ds.START, ds.END, width)
        days = await adapter.bucket_digests(ds.START, ds.END, "day")
        rows = [r async for r in adapter.iter_rows(ds.START, ds.END)]
    assert got.days == days
    want = ds.python_tables(rows, width, view.timezone)
    assert {d.astimezone(UTC): dict(t) for d, t in got.tables.items()} == want
    assert len(want) >= 5  # the DST day among them


async def test_an_empty_window_and_a_bad_width(stores: PostgresSource) -> None:
    async with opened(kind_postgres.view(stores.dsn, SPEC, "items")) as adapter:
        assert isinstance(adapter, PostgresAdapter)
        empty = await adapter.day_and_cell_digests(ds.END, ds.END, 16)
        assert (empty.days, dict(empty.tables)) == ([], {})
        with pytest.raises(ValueError, match="width"):
            await adapter.day_and_cell_digests(ds.START, ds.END, 0)


CONFIG = """
stores:
  src: {{kind: postgres, dsn: "{dsn}"}}
state: {{dsn: "{dsn}"}}
checks:
  tasks:
    source: {{store: src, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: src, table: copy, key: task_id, time: completed_at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
    drilldown: {{leaf_rows: 50}}
"""
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _verdict(b: BucketResult) -> tuple[object, ...]:
    keys = sorted((k.key or "", k.kind, k.source_copies, k.reader_copies) for k in b.samples)
    return (b.start, b.status, b.missing, b.extra, b.mismatched, b.duplicates, b.reasons, keys)


async def _plain_and_peeled(check: Check, end: datetime) -> tuple[RunResult, RunResult]:
    """Reconcile [T0, end) plainly, then peeling 32-cell digests; assert the same verdicts."""
    async with adapters(check) as (source, reader):
        now = end + timedelta(days=1)
        plain = await reconcile(check, source, reader, T0, end, now=now, sample_keys=10**6)
        peeled = await reconcile(
            check, source, reader, T0, end, now=now, sample_keys=10**6, first=FirstPass(width=32)
        )
    assert plain.error is None and peeled.error is None
    assert [_verdict(b) for b in peeled.buckets] == [_verdict(b) for b in plain.buckets]
    return plain, peeled


async def test_peeled_days_say_what_the_drill_down_says(stores: PostgresSource) -> None:
    rng = random.Random(15)
    conn = await asyncpg.connect(stores.dsn, timeout=TIMEOUT)
    try:
        await conn.execute(
            "CREATE TABLE tasks (task_id bigint, label text, completed_at timestamptz)"
        )
        await conn.execute(
            "INSERT INTO tasks SELECT i, 'l' || (i % 7), $1::timestamptz"
            " + (i * 7919 % 6000) * interval '61 seconds' + i * interval '1 microsecond'"
            " FROM generate_series(1, 6000) AS i",
            T0,
        )
        await conn.execute("CREATE TABLE copy AS SELECT * FROM tasks")
        # Spread drift, one crowded day, a moved row and a key held twice.
        gone = rng.sample(range(1, 6000), 40)
        await conn.execute("DELETE FROM copy WHERE task_id = ANY($1::bigint[])", gone)
        await conn.execute(
            "DELETE FROM copy WHERE task_id % 4 = 0 AND completed_at >= $1::timestamptz"
            " AND completed_at < $1::timestamptz + interval '1 day'",
            T0 + timedelta(days=2),
        )
        changed = rng.sample(range(1, 6000), 30)
        await conn.execute("UPDATE copy SET label = 'x' WHERE task_id = ANY($1::bigint[])", changed)
        await conn.execute(
            "UPDATE copy SET completed_at = completed_at + interval '5 minutes' WHERE task_id = 77"
        )
        await conn.execute(
            "INSERT INTO copy SELECT 10000 + i, 'new', $1::timestamptz + i * interval '1 hour'"
            " FROM generate_series(1, 5) AS i",
            T0,
        )
        await conn.execute("INSERT INTO copy SELECT * FROM tasks WHERE task_id = 4242")
    finally:
        await conn.close()
    check = load_text(CONFIG.format(dsn=stores.dsn)).checks["tasks"]
    plain, peeled = await _plain_and_peeled(check, T0 + timedelta(days=5))
    assert sum(b.missing for b in peeled.buckets) > 350
    # The crowded day and the day with a key held twice were drilled down (they have a
    # tree); the others were peeled and fetched only their differing rows.
    assert [not b.tree for b in peeled.buckets] == [True, True, False, False, True]
    assert peeled.rows_fetched < plain.rows_fetched and peeled.queries < plain.queries


async def test_a_day_too_crowded_for_its_digests_peels_after_one_more_scan(
    stores: PostgresSource,
) -> None:
    conn = await asyncpg.connect(stores.dsn, timeout=TIMEOUT)
    day1 = "completed_at >= $1::timestamptz + interval '1 day'"
    day1 += " AND completed_at < $1::timestamptz + interval '2 days'"
    try:
        await conn.execute(
            "CREATE TABLE crowd AS SELECT i::bigint AS task_id, 'l' || (i % 7) AS label,"
            " $1::timestamptz + i * interval '43 seconds' AS completed_at"
            " FROM generate_series(1, 6000) AS i",
            T0,
        )
        await conn.execute("CREATE INDEX ON crowd (completed_at)")
        await conn.execute("CREATE TABLE crowd_copy AS SELECT * FROM crowd")
        await conn.execute("CREATE INDEX ON crowd_copy (completed_at)")
        # Day 0 differs by 3 rows; day 1 by 400 (200 missing, 100 changed): far over 32 cells.
        await conn.execute("DELETE FROM crowd_copy WHERE task_id IN (5, 50, 500)")
        await conn.execute(f"DELETE FROM crowd_copy WHERE task_id % 10 = 0 AND {day1}", T0)
        await conn.execute(
            f"UPDATE crowd_copy SET label = 'x' WHERE task_id % 20 = 5 AND {day1}", T0
        )
    finally:
        await conn.close()
    text = CONFIG.format(dsn=stores.dsn).replace("table: tasks", "table: crowd")
    check = load_text(text.replace("table: copy", "table: crowd_copy")).checks["tasks"]
    _, peeled = await _plain_and_peeled(check, T0 + timedelta(days=3))
    assert [(b.missing, b.mismatched) for b in peeled.buckets] == [(3, 0), (201, 100), (0, 0)]
    assert not any(b.tree for b in peeled.buckets)  # no day drilled down
    # Each side's first pass, the source's fetch of day 0 (the reader holds none of its
    # differing rows), then each side's second scan of day 1 and its fetch.
    assert peeled.queries == 2 + 1 + 2 + 2
    assert peeled.rows_fetched == 3 + 201 + 2 * 100  # the differing rows themselves
