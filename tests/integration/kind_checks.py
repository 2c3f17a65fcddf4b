"""What the per-kind example checks share: their orders, planted copy, stores, runs and findings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
from opensearchpy import AsyncOpenSearch

from driftgauge.config.frozen import Config
from driftgauge.engine.result import RunResult
from tests.integration.conftest import PG_DSN, TIMEOUT, dsn_for, unique_name
from tests.integration.runs import reconcile_window
from tests.store_fixtures import load_index, pg_table

EXAMPLES = Path(__file__).parents[2] / "deploy" / "examples"
BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 3, 28, tzinfo=BERLIN)
END = datetime(2026, 3, 30, tzinfo=BERLIN)  # the 29th has 23 hours
BERLIN_DAYS = [START.astimezone(UTC), datetime(2026, 3, 28, 23, tzinfo=UTC)]
"""The starts of the two Berlin days in [START, END), the second springing forward."""
Order = tuple[str, str, Decimal, datetime]

ORDERS_COLUMNS = "order_id text, status text, amount numeric(10,2), updated_at timestamptz"
"""The PostgreSQL columns an Order fills."""

PLANTED = {
    "missing": {"o003", "o050"},
    "extra": {"x001"},
    "mismatched": {"o010", "o011", "o070", "o020"},
}
"""The keys `export` damages; a key held twice is a duplicate and, its copies differing in
count, mismatched."""
PLANTED_TOTALS = (2, 1, 4, 1)
"""`export`'s (missing, extra, mismatched, duplicates)."""


def make_orders(start: datetime = START, end: datetime = END) -> list[Order]:
    """Return orders o000..o119 at even steps over [start, end), whole seconds."""
    first = start.astimezone(UTC)
    step = (end.astimezone(UTC) - first) / 120
    return [
        (
            f"o{i:03d}",
            ("paid", "shipped", "open")[i % 3],
            Decimal(f"{i}.50"),
            (first + step * i).replace(microsecond=0),
        )
        for i in range(120)
    ]


def export(orders: list[Order]) -> list[Order]:
    """The copy: o003, o050 missing; x001 extra; 3 amounts changed; o020 twice."""
    by = {o[0]: o for o in orders}
    rows = [o for o in orders if o[0] not in ("o003", "o050")]
    rows = [(k, s, a + 1 if k in ("o010", "o011", "o070") else a, t) for k, s, a, t in rows]
    return [*rows, ("x001", "paid", Decimal("9.99"), by["o004"][3]), by["o020"]]


@asynccontextmanager
async def orders_database(orders: list[Order]) -> AsyncIterator[str]:
    """Yield the DSN of a fresh PostgreSQL database whose `orders` table holds the orders."""
    name = unique_name("dg_orders")
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        await pg_table(
            dsn_for(name),
            "orders",
            ORDERS_COLUMNS,
            orders,
        )
        yield dsn_for(name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@asynccontextmanager
async def orders_index(url: str, orders: list[Order]) -> AsyncIterator[str]:
    """Yield the name of a fresh two-shard index at `url` holding the orders, deleted after."""
    index = unique_name("dg_orders")
    client = AsyncOpenSearch(hosts=[url], timeout=TIMEOUT)
    try:
        await load_index(
            client,
            index,
            {"order_id": "keyword", "status": "keyword", "amount": "keyword", "updated_at": "date"},
            (
                {"order_id": k, "status": s, "amount": str(a), "updated_at": t.isoformat()}
                for k, s, a, t in orders
            ),
            shards=2,
            replicas=0,
        )
        yield index
    finally:
        await client.indices.delete(index=index, ignore_unavailable=True)
        await client.close()


def example_text(example: Path, orders_dsn: str, *swaps: tuple[str, str]) -> str:
    """Return an example config's text, each (old, new) of `swaps` and then its DSNs put in."""
    text = example.read_text(encoding="utf-8")
    for old, new in swaps:
        text = text.replace(old, new)
    text = text.replace("env:ORDERS_DSN", orders_dsn)
    return text.replace("env:DRIFTGAUGE_STATE_DSN", PG_DSN)


async def run_check(
    config: Config, name: str, start: datetime = START, end: datetime = END
) -> RunResult:
    """Reconcile one check of the config over [start, end), a day after it ended."""
    return await reconcile_window(config.checks[name], start, end, sample_keys=50)


def found(result: RunResult) -> dict[str, set[str | None]]:
    """Return the drilled-down keys by kind (missing, extra, mismatched)."""
    keys: dict[str, set[str | None]] = {}
    for bucket in result.buckets:
        for key in bucket.samples:
            keys.setdefault(key.kind, set()).add(key.key)
    return keys


def totals(result: RunResult) -> tuple[int, int, int, int]:
    """Return the run's (missing, extra, mismatched, duplicates) over all its buckets."""
    m, e, x, d = (
        sum(getattr(b, f) for b in result.buckets)
        for f in ("missing", "extra", "mismatched", "duplicates")
    )
    return m, e, x, d


def assert_berlin_days(result: RunResult) -> None:
    """Assert the run ended without an error and its buckets are the two Berlin days."""
    assert result.error is None, result.error
    assert [b.start for b in result.buckets] == BERLIN_DAYS


def assert_planted(
    result: RunResult,
    keys: dict[str, set[str]] = PLANTED,
    counts: tuple[int, int, int, int] = PLANTED_TOTALS,
) -> None:
    """Assert the run found exactly `keys` and `counts` over the two Berlin days, both drifted."""
    assert_berlin_days(result)
    assert found(result) == keys
    assert totals(result) == counts
    assert {b.status for b in result.buckets} == {"drift"}
