"""The example's two checks on the real stores: PostgreSQL -> MariaDB and MariaDB -> OpenSearch.

Each side gets planted drift (missing, extra, mismatched and duplicated rows) and the run
must name exactly those keys, over a Berlin day that springs forward (23 hours).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import RunResult
from driftgauge.stores import open_adapter
from driftgauge.stores.base import KeyQuery
from tests.conformance import kind_mariadb as my
from tests.integration.conftest import OS_URL, PG_DSN, TIMEOUT, dsn_for, unique_name

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "deploy" / "examples" / "mariadb.yml"
BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 3, 28, tzinfo=BERLIN)
END = datetime(2026, 3, 30, tzinfo=BERLIN)  # the 29th has 23 hours
Order = tuple[str, str, Decimal, datetime]


def _orders() -> list[Order]:
    first = START.astimezone(UTC)
    step = (END.astimezone(UTC) - first) / 120
    return [
        (
            f"o{i:03d}",
            ("paid", "shipped", "open")[i % 3],
            Decimal(f"{i}.50"),
            (first + step * i).replace(microsecond=0),
        )
        for i in range(120)
    ]


def _replica(orders: list[Order]) -> list[Order]:
    """The MariaDB copy: o003, o050 missing; x001 extra; 3 amounts changed; o020 twice."""
    by = {o[0]: o for o in orders}
    rows = [o for o in orders if o[0] not in ("o003", "o050")]
    rows = [(k, s, a + 1 if k in ("o010", "o011", "o070") else a, t) for k, s, a, t in rows]
    return [*rows, ("x001", "paid", Decimal("9.99"), by["o004"][3]), by["o020"]]


def _index(replica: list[Order]) -> list[Order]:
    """The OpenSearch copy of the replica: o020 once, o030 missing, y001 and y002 extra,
    o040's status changed, o060 twice."""
    by = {o[0]: o for o in replica}
    rows = [o for o in replica[:-1] if o[0] != "o030"]
    rows = [(k, "lost" if k == "o040" else s, a, t) for k, s, a, t in rows]
    return [
        *rows,
        ("y001", "paid", Decimal("1.00"), by["o005"][3]),
        ("y002", "open", Decimal("2.00"), by["o090"][3]),
        by["o060"],
    ]


@dataclass
class Stores:
    config: Config


@pytest.fixture(scope="module")
async def stores() -> AsyncIterator[Stores]:
    """Fill a PostgreSQL database, a MariaDB database and an index; load the example."""
    orders = _orders()
    replica = _replica(orders)
    pg_name = unique_name("dg_orders")
    index = unique_name("dg_orders")
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    await admin.execute(f'CREATE DATABASE "{pg_name}"')
    my_dsn = await my.new_database()
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=TIMEOUT)
    try:
        conn = await asyncpg.connect(dsn_for(pg_name), timeout=TIMEOUT)
        try:
            await conn.execute(
                "CREATE TABLE orders (order_id text, status text, "
                "amount numeric(10,2), updated_at timestamptz)"
            )
            await conn.copy_records_to_table("orders", records=orders)
        finally:
            await conn.close()
        await my.execute(
            "CREATE TABLE orders (order_id VARCHAR(20) COLLATE "
            "utf8mb4_unicode_ci, status VARCHAR(20), amount DECIMAL(10,2), "
            "updated_at DATETIME(6), INDEX (updated_at))",
            dsn=my_dsn,
        )
        await my.insert(my_dsn, "orders", replica)
        await client.indices.create(
            index=index,
            body={
                "settings": {"number_of_shards": 2, "number_of_replicas": 0},
                "mappings": {
                    "properties": {
                        "order_id": {"type": "keyword"},
                        "status": {"type": "keyword"},
                        "amount": {"type": "keyword"},
                        "updated_at": {"type": "date"},
                    }
                },
            },
        )
        await async_bulk(
            client,
            (
                {
                    "_index": index,
                    "_source": {
                        "order_id": k,
                        "status": s,
                        "amount": str(a),
                        "updated_at": t.isoformat(),
                    },
                }
                for k, s, a, t in _index(replica)
            ),
            refresh=True,
        )
        text = EXAMPLE.read_text(encoding="utf-8").replace("index: orders", f"index: {index}")
        text = text.replace("env:ORDERS_DSN", dsn_for(pg_name))
        text = text.replace("env:SHOP_MARIADB_DSN", my_dsn)
        text = text.replace("env:DRIFTGAUGE_STATE_DSN", PG_DSN)
        text = text.replace("url: http://127.0.0.1:9250", f"url: {OS_URL}")
        yield Stores(load_text(text, source=str(EXAMPLE)))
    finally:
        await client.indices.delete(index=index, ignore_unavailable=True)
        await client.close()
        await my.drop_database(my_dsn)
        await admin.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
        await admin.close()


async def _run(config: Config, name: str) -> RunResult:
    check = config.checks[name]
    source = await open_adapter(check.source)
    try:
        reader = await open_adapter(check.reader)
        try:
            return await reconcile(
                check, source, reader, START, END, now=END + timedelta(days=1), sample_keys=50
            )
        finally:
            await reader.close()
    finally:
        await source.close()


def _found(result: RunResult) -> dict[str, set[str | None]]:
    assert result.error is None, result.error
    found: dict[str, set[str | None]] = {}
    for bucket in result.buckets:
        for key in bucket.samples:
            found.setdefault(key.kind, set()).add(key.key)
    return found


def _totals(result: RunResult) -> tuple[int, int, int, int]:
    return (
        sum(b.missing for b in result.buckets),
        sum(b.extra for b in result.buckets),
        sum(b.mismatched for b in result.buckets),
        sum(b.duplicates for b in result.buckets),
    )


async def test_postgres_to_mariadb_finds_the_planted_rows(stores: Stores) -> None:
    result = await _run(stores.config, "orders_replica")
    assert [b.start for b in result.buckets] == [
        START.astimezone(UTC),
        datetime(2026, 3, 28, 23, tzinfo=UTC),
    ]
    # A key held twice is a duplicate and, its copies differing in count, mismatched.
    assert _found(result) == {
        "missing": {"o003", "o050"},
        "extra": {"x001"},
        "mismatched": {"o010", "o011", "o070", "o020"},
    }
    assert _totals(result) == (2, 1, 4, 1)
    assert {b.status for b in result.buckets} == {"drift"}


async def test_mariadb_to_opensearch_finds_the_planted_rows(stores: Stores) -> None:
    result = await _run(stores.config, "orders_search")
    assert _found(result) == {
        "missing": {"o030"},
        "extra": {"y001", "y002"},
        "mismatched": {"o040", "o060", "o020"},
    }
    assert _totals(result) == (1, 2, 3, 2)
    assert sum(b.expected for b in result.buckets) == 120 - 2 + 1 + 1


async def test_a_mariadb_source_picks_the_canary_key_with_its_query(stores: Stores) -> None:
    # %(start)s and %(end)s are the day's bounds; a literal % is doubled, as the driver needs.
    adapter = await open_adapter(stores.config.checks["orders_search"].source)
    try:
        assert isinstance(adapter, KeyQuery)
        query = (
            "SELECT order_id FROM orders WHERE updated_at >= %(start)s AND updated_at < %(end)s "
            "AND order_id LIKE 'o%%' ORDER BY updated_at DESC LIMIT 1"
        )
        day = datetime(2026, 3, 29, tzinfo=BERLIN)
        picked = await adapter.query_key(query, day, day + timedelta(days=1))
        assert (
            picked
            == max(
                (o for o in _replica(_orders()) if day <= o[3] < day + timedelta(days=1)),
                key=lambda o: o[3],
            )[0]
        )
        assert await adapter.query_key(query, END, END + timedelta(days=1)) is None
    finally:
        await adapter.close()
