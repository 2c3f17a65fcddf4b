"""The example's check on the real stores: PostgreSQL -> Elasticsearch 7.10.

The index gets planted drift (missing, extra, mismatched and duplicated rows, and a row the
reader's filter hides) and the run must name exactly those keys, over a Berlin day that
springs forward (23 hours).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from tests.conformance.kind_elasticsearch import ES_URL
from tests.integration.conftest import PG_DSN, TIMEOUT, dsn_for, unique_name

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "deploy" / "examples" / "elasticsearch.yml"
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


def _index(orders: list[Order]) -> list[Order]:
    """The index: o003, o050 missing; x001 extra; o010, o011 changed; o020 twice; o070
    hidden by the reader's filter (so missing to the reader)."""
    by = {o[0]: o for o in orders}
    rows = [o for o in orders if o[0] not in ("o003", "o050")]
    rows = [(k, s, a + 1 if k in ("o010", "o011") else a, t) for k, s, a, t in rows]
    rows = [(k, "hidden" if k == "o070" else s, a, t) for k, s, a, t in rows]
    return [*rows, ("x001", "paid", Decimal("9.99"), by["o004"][3]), by["o020"]]


@pytest.fixture(scope="module")
async def config() -> AsyncIterator[Config]:
    """Fill a PostgreSQL database and an Elasticsearch index; load the example."""
    orders = _orders()
    pg_name = unique_name("dg_orders")
    index = unique_name("dg_orders")
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    await admin.execute(f'CREATE DATABASE "{pg_name}"')
    client = AsyncOpenSearch(hosts=[ES_URL], timeout=TIMEOUT)
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
                for k, s, a, t in _index(orders)
            ),
            refresh=True,
        )
        text = EXAMPLE.read_text(encoding="utf-8").replace("index: orders", f"index: {index}")
        text = text.replace("env:ORDERS_DSN", dsn_for(pg_name))
        text = text.replace("env:DRIFTGAUGE_STATE_DSN", PG_DSN)
        text = text.replace("url: http://127.0.0.1:9260", f"url: {ES_URL}")
        yield load_text(text, source=str(EXAMPLE))
    finally:
        await client.indices.delete(index=index, ignore_unavailable=True)
        await client.close()
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


async def test_postgres_to_elasticsearch_finds_the_planted_rows(config: Config) -> None:
    assert config.checks["orders_search"].reader.kind == "elasticsearch"
    result = await _run(config, "orders_search")
    assert result.error is None, result.error
    assert [b.start for b in result.buckets] == [
        START.astimezone(UTC),
        datetime(2026, 3, 28, 23, tzinfo=UTC),
    ]
    found: dict[str, set[str | None]] = {}
    for bucket in result.buckets:
        for key in bucket.samples:
            found.setdefault(key.kind, set()).add(key.key)
    # A key held twice is a duplicate and, its copies differing in count, mismatched.
    assert found == {
        "missing": {"o003", "o050", "o070"},
        "extra": {"x001"},
        "mismatched": {"o010", "o011", "o020"},
    }
    totals = [
        sum(getattr(b, name) for b in result.buckets)
        for name in ("missing", "extra", "mismatched", "duplicates")
    ]
    assert totals == [3, 1, 3, 1]
    assert {b.status for b in result.buckets} == {"drift"}
