"""PostgreSQL counts keys as rows only where a constraint makes them unique.

The day pass and the difference digests skip the distinct-key count on such tables; the
answers must be the ones the distinct count gives, and every table a constraint does
not cover (nullable, partial, inherited, cast) must still be counted key by key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from driftgauge.stores import open_adapter
from driftgauge.stores.postgres.adapter import PostgresAdapter
from driftgauge.stores.postgres.preflight import unique_key_args
from tests.integration.conftest import TIMEOUT, make_view, pg_store

pytestmark = pytest.mark.integration

START = datetime(2026, 3, 1, tzinfo=UTC)
END = START + timedelta(days=3)
ROWS = [(i, f"v{i % 7}", START + timedelta(minutes=27 * i)) for i in range(1, 150)]

TABLES = {
    # name: (DDL, keys unique by constraint)
    "pk": ("CREATE TABLE pk (id bigint PRIMARY KEY, label text, t timestamptz)", True),
    "plain": ("CREATE TABLE plain (id bigint NOT NULL, label text, t timestamptz)", False),
    "nullable": ("CREATE TABLE nullable (id bigint UNIQUE, label text, t timestamptz)", False),
    "partial": (
        "CREATE TABLE partial (id bigint NOT NULL, label text, t timestamptz);"
        " CREATE UNIQUE INDEX ON partial (id) WHERE label <> 'v3'",
        False,
    ),
    "pair": (
        "CREATE TABLE pair (id bigint NOT NULL, label text, t timestamptz, UNIQUE (id, label))",
        False,
    ),
    "textid": ("CREATE TABLE textid (id text PRIMARY KEY, label text, t timestamptz)", False),
    "parent": (
        "CREATE TABLE parent (id bigint PRIMARY KEY, label text, t timestamptz);"
        " CREATE TABLE child () INHERITS (parent)",
        False,
    ),
    "parted": (
        "CREATE TABLE parted (id bigint PRIMARY KEY, label text, t timestamptz)"
        " PARTITION BY RANGE (id);"
        " CREATE TABLE parted_a PARTITION OF parted FOR VALUES FROM (MINVALUE) TO (75);"
        " CREATE TABLE parted_b PARTITION OF parted FOR VALUES FROM (75) TO (MAXVALUE)",
        True,
    ),
}


@pytest.fixture(scope="module")
async def loaded(pg_database: str) -> AsyncIterator[str]:
    """Yield the database holding every table with the same rows."""
    conn = await asyncpg.connect(pg_database, timeout=TIMEOUT)
    try:
        for name, (ddl, _) in TABLES.items():
            await conn.execute(ddl)
            rows = [(str(i) if name == "textid" else i, v, t) for i, v, t in ROWS]
            await conn.copy_records_to_table(name, records=rows)
        # Two copies of one key that no constraint forbids: the child of an inheritance
        # parent, and a plain table (its day must count one key fewer than rows).
        await conn.execute("INSERT INTO child VALUES (5, 'v5', $1)", ROWS[4][2])
        await conn.execute("INSERT INTO plain VALUES (5, 'v5', $1)", ROWS[4][2])
        yield pg_database
    finally:
        await conn.close()


def _view(dsn: str, table: str, key_type: str = "integer") -> object:
    return make_view(
        pg_store(dsn),
        key="id",
        time="t",
        fields={"label": ("label", "string")},
        key_type=key_type,
        table=table,
    )


@pytest.mark.parametrize("table", sorted(TABLES))
async def test_the_probe_says_unique_only_where_a_constraint_covers_every_row(
    loaded: str, table: str
) -> None:
    args = unique_key_args(_view(loaded, table))  # type: ignore[arg-type]
    assert args is not None
    conn = await asyncpg.connect(loaded, timeout=TIMEOUT)
    try:
        got = await conn.fetchval(args[0], *args[1:])
    finally:
        await conn.close()
    assert got is TABLES[table][1]


def test_no_probe_for_a_query_view_or_a_composite_key(pg_database: str) -> None:
    store = pg_store(pg_database)
    fields = {"label": ("label", "string")}
    query = make_view(store, key="id", time="t", fields=fields, query="SELECT * FROM pk")
    pair = make_view(store, key=("id", "label"), time="t", fields={}, table="pair")
    assert unique_key_args(query) is None
    assert unique_key_args(pair) is None


async def _passes(dsn: str, table: str) -> tuple[object, object]:
    adapter = await open_adapter(_view(dsn, table))  # type: ignore[arg-type]
    try:
        assert isinstance(adapter, PostgresAdapter)
        days = await adapter.bucket_digests(START, END, "day")
        cells = await adapter.day_and_cell_digests(START, END, 32)
    finally:
        await adapter.close()
    assert cells.days == days
    return days, cells.tables


async def test_rows_counted_as_keys_answer_what_the_distinct_count_answers(loaded: str) -> None:
    # pk (no distinct count), nullable (distinct count) and parted (partitions, no
    # distinct count) hold the same rows: every figure must agree.
    want = await _passes(loaded, "nullable")
    assert await _passes(loaded, "pk") == want
    assert await _passes(loaded, "parted") == want
    days, _ = want
    assert sum(d.agg.count for d in days) == len(ROWS)  # type: ignore[attr-defined]
    assert all(d.agg.count == d.agg.distinct_keys for d in days)  # type: ignore[attr-defined]


@pytest.mark.parametrize("table", ["plain", "parent"])
async def test_a_duplicate_no_constraint_forbids_is_counted(loaded: str, table: str) -> None:
    days, _ = await _passes(loaded, table)
    dup = [d for d in days if d.agg.count != d.agg.distinct_keys]  # type: ignore[attr-defined]
    assert len(dup) == 1
    assert dup[0].agg.count == dup[0].agg.distinct_keys + 1
