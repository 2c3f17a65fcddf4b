"""The example's check on the real stores: PostgreSQL -> Elasticsearch 7.10.

The index gets planted drift (missing, extra, mismatched and duplicated rows, and a row the
reader's filter hides) and the run must name exactly those keys, over a Berlin day that
springs forward (23 hours).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from tests.conformance.kind_elasticsearch import ES_URL
from tests.integration.kind_checks import (
    EXAMPLES,
    Order,
    assert_planted,
    example_text,
    make_orders,
    orders_database,
    orders_index,
    run_check,
)

pytestmark = pytest.mark.integration

EXAMPLE = EXAMPLES / "elasticsearch.yml"


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
    orders = make_orders()
    async with orders_database(orders) as dsn, orders_index(ES_URL, _index(orders)) as index:
        text = example_text(
            EXAMPLE,
            dsn,
            ("index: orders", f"index: {index}"),
            ("url: http://127.0.0.1:9260", f"url: {ES_URL}"),
        )
        yield load_text(text, source=str(EXAMPLE))


async def test_postgres_to_elasticsearch_finds_the_planted_rows(config: Config) -> None:
    assert config.checks["orders_search"].reader.kind == "elasticsearch"
    result = await run_check(config, "orders_search")
    # A key held twice is a duplicate and, its copies differing in count, mismatched.
    planted = {
        "missing": {"o003", "o050", "o070"},
        "extra": {"x001"},
        "mismatched": {"o010", "o011", "o020"},
    }
    assert_planted(result, planted, (3, 1, 3, 1))
