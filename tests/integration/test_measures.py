"""Measure totals on the real PostgreSQL and OpenSearch: exact, per day and hour, and judged."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.cli.render import render_run
from driftgauge.config.frozen import Check, Field, State, View
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import DriftgaugeError
from driftgauge.engine.result import RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.metrics.collector import build_registry, reconciliation_part
from driftgauge.metrics.snapshot import CheckSnapshot
from driftgauge.state.store import StateStore
from driftgauge.stores.preflight import preflight
from tests.store_fixtures import load_index, pg_table

from .conftest import TIMEOUT, make_view, os_store, pg_store
from .runs import adapters, opened, reconcile_window
from .service_helpers import schema_name

pytestmark = pytest.mark.integration

DAY0 = datetime(2026, 3, 14, tzinfo=UTC)
FIELDS = {"amount": ("amount_base", "decimal"), "qty": ("qty", "integer")}


@dataclass
class Order:
    """One order row."""

    id: str
    at: datetime
    amount: Decimal
    qty: int


def make_orders(n: int = 600, seed: int = 15) -> list[Order]:
    """Return orders over two days with amounts of two decimals, some negative (refunds)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        cents = rnd.randint(-50_000, 9_999_999_999)
        out.append(
            Order(
                f"o{i:05d}",
                DAY0 + timedelta(seconds=rnd.randint(0, 2 * 86400 - 1)),
                Decimal(cents).scaleb(-2),
                rnd.randint(1, 9),
            )
        )
    return out


def oracle(orders: list[Order], hours: bool = False) -> dict[datetime, dict[str, Decimal]]:
    """Return each bucket's totals, summed by Python's Decimal."""
    out: dict[datetime, dict[str, Decimal]] = {}
    for o in orders:
        b = (
            o.at.replace(minute=0, second=0, microsecond=0)
            if hours
            else o.at.replace(hour=0, minute=0, second=0, microsecond=0)
        )
        t = out.setdefault(b, {"amount": Decimal(0), "qty": Decimal(0)})
        t["amount"] += o.amount
        t["qty"] += o.qty
    return out


async def load_pg(dsn: str, table: str, orders: list[Order]) -> None:
    """Create `table` and insert the orders."""
    columns = "id text, created_at timestamptz, amount_base numeric(14, 2), qty int"
    await pg_table(dsn, table, columns, [(o.id, o.at, o.amount, o.qty) for o in orders])


async def load_os(
    client: AsyncOpenSearch, index: str, orders: list[Order], amount_type: dict[str, object]
) -> None:
    """Create `index` with `amount_type` for amount_base and index the orders."""
    await load_index(
        client,
        index,
        {"id": "keyword", "created_at": "date_nanos", "amount_base": amount_type, "qty": "long"},
        (
            {
                "_id": o.id,
                "id": o.id,
                "created_at": o.at.isoformat(),
                "amount_base": str(o.amount),
                "qty": o.qty,
            }
            for o in orders
        ),
    )


def with_measures(view: View, scale: int | None = 2) -> View:
    """Return the view summing amount and qty."""
    return replace(view, measures=("amount", "qty"), measure_scale=scale)


def pg_view(dsn: str, table: str) -> View:
    return with_measures(
        make_view(pg_store(dsn), key="id", time="created_at", fields=FIELDS, table=table)
    )


def os_view(index: str, scale: int | None = 2) -> View:
    return with_measures(
        make_view(os_store(), key="id", time="created_at", fields=FIELDS, index=index), scale
    )


def check_of(source: View, reader: View) -> Check:
    return Check(
        name="orders",
        source=source,
        reader=reader,
        fields=source.fields,
        key_type="string",
        timezone=ZoneInfo("UTC"),
        settle=timedelta(hours=2),
        measures=source.measures,
    )


@pytest.fixture(scope="module")
async def stores(
    pg_database: str, os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> AsyncIterator[dict[str, object]]:
    """Load one set of orders into a table and an index (amounts as keyword and scaled)."""
    orders = make_orders()
    table = "orders_m"
    await load_pg(pg_database, table, orders)
    kw, scaled = os_index("dg_measures_kw"), os_index("dg_measures_sf")
    await load_os(os_client, kw, orders, {"type": "keyword"})
    await load_os(os_client, scaled, orders, {"type": "scaled_float", "scaling_factor": 100})
    yield {"orders": orders, "dsn": pg_database, "table": table, "kw": kw, "scaled": scaled}


@pytest.mark.parametrize("side", ["pg", "os_keyword", "os_scaled_float"])
@pytest.mark.parametrize("granularity", ["day", "hour"])
async def test_totals_equal_a_decimal_oracle(
    stores: dict[str, object], side: str, granularity: str
) -> None:
    view = {
        "pg": lambda: pg_view(str(stores["dsn"]), str(stores["table"])),
        "os_keyword": lambda: os_view(str(stores["kw"])),
        "os_scaled_float": lambda: os_view(str(stores["scaled"])),
    }[side]()
    async with opened(view) as adapter:
        got = await adapter.bucket_digests(DAY0, DAY0 + timedelta(days=2), granularity)  # type: ignore[arg-type]
    want = oracle(stores["orders"], hours=granularity == "hour")  # type: ignore[arg-type]
    assert {b.start: dict(b.agg.measures or {}) for b in got} == want
    assert len(want) == (2 if granularity == "day" else 48)


async def test_a_doubled_day_doubles_its_total(stores: dict[str, object]) -> None:
    orders: list[Order] = stores["orders"]  # type: ignore[assignment]
    dsn = str(stores["dsn"])
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        await conn.execute("CREATE TABLE orders_doubled AS SELECT * FROM orders_m")
        await conn.execute(
            "INSERT INTO orders_doubled SELECT * FROM orders_m WHERE created_at < $1",
            DAY0 + timedelta(days=1),
        )
        await conn.execute("CREATE TABLE orders_changed AS SELECT * FROM orders_m")
        await conn.execute(
            "UPDATE orders_changed SET amount_base = amount_base + 0.01 WHERE id = $1", orders[0].id
        )
    finally:
        await conn.close()
    want = oracle(orders)
    source = pg_view(dsn, "orders_m")
    for reader_table in ("orders_doubled", "orders_changed"):
        check = check_of(source, replace(source, table=reader_table))
        result = await reconcile_window(
            check, DAY0, DAY0 + timedelta(days=2), now=DAY0 + timedelta(days=3)
        )
        by_day = {b.start: b for b in result.buckets}
        if reader_table == "orders_doubled":
            await stored_shown_and_scraped(dsn, check, result, want[DAY0])
            day = by_day[DAY0]
            assert day.status == "drift"
            assert day.duplicates == len([o for o in orders if o.at < DAY0 + timedelta(days=1)])
            assert day.reader.measures == {k: 2 * v for k, v in want[DAY0].items()}
            assert day.source.measures == want[DAY0]
            assert any(r.startswith("measure[amount] total ") for r in day.reasons)
            assert by_day[DAY0 + timedelta(days=1)].status == "ok"
        else:
            moved = orders[0].at.replace(hour=0, minute=0, second=0, microsecond=0)
            day = by_day[moved]
            assert day.status == "drift"
            assert day.mismatched == 1
            assert day.reader.measures is not None
            assert day.reader.measures["amount"] - want[moved]["amount"] == Decimal("0.01")
            assert day.payload().reader.measures == {
                "amount": f"{want[moved]['amount'] + Decimal('0.01'):f}",
                "qty": f"{want[moved]['qty']:f}",
            }


async def stored_shown_and_scraped(
    dsn: str, check: Check, result: RunResult, want: dict[str, Decimal]
) -> None:
    """Store the doubled run; its stored bucket, nodes, CLI text and metrics show the totals."""
    now = DAY0 + timedelta(days=3)
    result.finished_at = now
    state = await StateStore.open(State(Secret(dsn), schema_name()), deadline=10)
    try:
        run_id = await state.begin_run(
            check.name, DAY0, DAY0 + timedelta(days=2), trigger="manual", started_at=now
        )
        await state.complete_run(run_id, result)
        stored = await state.day_buckets(check.name, DAY0.date(), DAY0.date(), check.timezone)
        hours, _ = await state.day_nodes(run_id, DAY0.date())
    finally:
        await state.close()
    (day,) = stored
    assert day.bucket.source.measures == want
    assert day.bucket.reader.measures == {k: 2 * v for k, v in want.items()}
    assert day.payload().reader.measures == {k: f"{2 * v:f}" for k, v in want.items()}
    hour_totals = [n.reader.measures for n in hours if n.level == "hour"]
    assert hour_totals and all(t is not None for t in hour_totals)
    assert sum((t or {})["amount"] for t in hour_totals) == 2 * want["amount"]
    text = render_run(result)
    assert f"{DAY0.date()} amount {want['amount']:f} / {2 * want['amount']:f}  <--" in text
    registry = build_registry(
        [
            reconciliation_part(
                lambda: {check.name: CheckSnapshot(check=check.name, buckets=(day.bucket,))}
            )
        ]
    )
    labels = {"check": check.name, "day": DAY0.date().isoformat(), "measure": "amount"}
    assert registry.get_sample_value(
        "driftgauge_bucket_measure", {**labels, "side": "reader"}
    ) == float(2 * want["amount"])


async def test_pg_and_os_totals_agree_and_a_bucket_is_ok(stores: dict[str, object]) -> None:
    # Keyword amounts: the row digest reads a scaled_float's double (…370000005) as is.
    check = check_of(pg_view(str(stores["dsn"]), str(stores["table"])), os_view(str(stores["kw"])))
    result = await reconcile_window(
        check,
        DAY0,
        DAY0 + timedelta(days=2),
        checked=True,
        now=DAY0 + timedelta(days=3),
        first=FirstPass(slots=True),
    )
    assert [b.status for b in result.buckets] == ["ok", "ok"], [b.reasons for b in result.buckets]
    assert [b.reader.measures for b in result.buckets] == list(oracle(stores["orders"]).values())  # type: ignore[arg-type]


async def test_a_value_finer_than_the_scale_is_refused_naming_the_field(
    stores: dict[str, object],
) -> None:
    async with opened(os_view(str(stores["kw"]), scale=1)) as adapter:
        with pytest.raises(DriftgaugeError) as exc:
            await adapter.bucket_digests(DAY0, DAY0 + timedelta(days=2), "day")
    assert "amount_base" in str(exc.value)
    assert "measure_scale 1" in str(exc.value)


async def test_a_double_or_coarse_mapping_is_refused_by_the_preflight(
    stores: dict[str, object], os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> None:
    orders: list[Order] = stores["orders"][:5]  # type: ignore[index]
    dbl, coarse = os_index("dg_measures_dbl"), os_index("dg_measures_coarse")
    await load_os(os_client, dbl, orders, {"type": "double"})
    await load_os(os_client, coarse, orders, {"type": "scaled_float", "scaling_factor": 1000})
    src_view = pg_view(str(stores["dsn"]), str(stores["table"]))
    for index, why in ((dbl, "double"), (coarse, "scaling_factor 1000")):
        check = check_of(src_view, os_view(index))
        async with adapters(check) as (src, rdr):
            with pytest.raises(DriftgaugeError) as exc:
                await preflight(check, src, rdr)
        text = str(exc.value)
        assert "checks.orders.reader.fields.amount" in text, text
        assert why in text and "measure" in text, text


async def test_a_float_column_is_refused_as_a_measure(stores: dict[str, object]) -> None:
    dsn = str(stores["dsn"])
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        await conn.execute(
            "CREATE TABLE orders_float AS SELECT id, created_at, "
            "amount_base::float8 AS amount_base, qty FROM orders_m"
        )
    finally:
        await conn.close()
    src_view = pg_view(dsn, "orders_m")
    check = check_of(src_view, replace(src_view, table="orders_float"))
    async with adapters(check) as (src, rdr):
        with pytest.raises(DriftgaugeError) as exc:
            await preflight(check, src, rdr)
    assert "checks.orders.reader.fields.amount: column amount_base is float8" in str(exc.value)


def test_fields_helper_keeps_order() -> None:
    view = os_view("x")
    assert view.measure_columns == ("amount_base", "qty")
    assert view.fields[0] == Field("amount", "decimal")


@pytest.mark.parametrize("granularity", ["day", "hour"])
async def test_duckdb_totals_equal_a_decimal_oracle(tmp_path: Path, granularity: str) -> None:
    import duckdb

    from driftgauge.stores.duckdb.settings import DuckDBStore

    orders = make_orders(200, seed=9)
    path = tmp_path / "orders.duckdb"
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "CREATE TABLE orders (id VARCHAR, created_at TIMESTAMPTZ, "
            "amount_base DECIMAL(14, 2), qty INTEGER)"
        )
        con.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            [(o.id, o.at, o.amount, o.qty) for o in orders],
        )
    finally:
        con.close()
    view = with_measures(
        make_view(
            DuckDBStore("duck", str(path)),  # type: ignore[arg-type]
            key="id",
            time="created_at",
            fields=FIELDS,
            table="orders",
        )
    )
    async with opened(view) as adapter:
        got = await adapter.bucket_digests(DAY0, DAY0 + timedelta(days=2), granularity)  # type: ignore[arg-type]
    want = oracle(orders, hours=granularity == "hour")
    assert {b.start: dict(b.agg.measures or {}) for b in got} == want
