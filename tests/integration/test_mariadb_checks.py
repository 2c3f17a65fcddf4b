"""The example's two checks on the real stores: PostgreSQL -> MariaDB and MariaDB -> OpenSearch.

Each side gets planted drift (missing, extra, mismatched and duplicated rows) and the run
must name exactly those keys, over a Berlin day that springs forward (23 hours).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.stores.base import KeyQuery
from tests.conformance import kind_mariadb as my
from tests.integration.conftest import OS_URL
from tests.integration.kind_checks import (
    BERLIN,
    END,
    EXAMPLES,
    Order,
    assert_planted,
    example_text,
    export,
    found,
    make_orders,
    orders_database,
    orders_index,
    run_check,
    totals,
)
from tests.integration.runs import opened

pytestmark = pytest.mark.integration

EXAMPLE = EXAMPLES / "mariadb.yml"


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
    orders = make_orders()
    replica = export(orders)  # the MariaDB copy holds the shared planted damage
    async with orders_database(orders) as dsn:
        my_dsn = await my.new_database()
        try:
            await my.execute(
                "CREATE TABLE orders (order_id VARCHAR(20) COLLATE "
                "utf8mb4_unicode_ci, status VARCHAR(20), amount DECIMAL(10,2), "
                "updated_at DATETIME(6), INDEX (updated_at))",
                dsn=my_dsn,
            )
            await my.insert(my_dsn, "orders", replica)
            async with orders_index(OS_URL, _index(replica)) as index:
                text = example_text(
                    EXAMPLE,
                    dsn,
                    ("index: orders", f"index: {index}"),
                    ("env:SHOP_MARIADB_DSN", my_dsn),
                    ("url: http://127.0.0.1:9250", f"url: {OS_URL}"),
                )
                yield Stores(load_text(text, source=str(EXAMPLE)))
        finally:
            await my.drop_database(my_dsn)


async def test_postgres_to_mariadb_finds_the_planted_rows(stores: Stores) -> None:
    result = await run_check(stores.config, "orders_replica")
    # The replica is the shared planted export: its keys and counts are kind_checks.PLANTED's.
    assert_planted(result)


async def test_mariadb_to_opensearch_finds_the_planted_rows(stores: Stores) -> None:
    result = await run_check(stores.config, "orders_search")
    assert result.error is None, result.error
    assert found(result) == {
        "missing": {"o030"},
        "extra": {"y001", "y002"},
        "mismatched": {"o040", "o060", "o020"},
    }
    assert totals(result) == (1, 2, 3, 2)
    assert sum(b.expected for b in result.buckets) == 120 - 2 + 1 + 1


async def test_a_mariadb_source_picks_the_canary_key_with_its_query(stores: Stores) -> None:
    # %(start)s and %(end)s are the day's bounds; a literal % is doubled, as the driver needs.
    async with opened(stores.config.checks["orders_search"].source) as adapter:
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
                (o for o in export(make_orders()) if day <= o[3] < day + timedelta(days=1)),
                key=lambda o: o[3],
            )[0]
        )
        assert await adapter.query_key(query, END, END + timedelta(days=1)) is None
