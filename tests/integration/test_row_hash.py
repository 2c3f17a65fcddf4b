"""The lookup3 row hash on the real PostgreSQL: probed by the preflight, exact end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.encoding.digest import row_hash
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.postgres import preflight as pg_preflight
from tests.store_fixtures import PG_OS_STORES, load_index, pg_fetch

from .conftest import OS_URL
from .runs import adapters, reconcile_window

pytestmark = pytest.mark.integration

T0 = datetime(2026, 2, 1, tzinfo=UTC)
DAYS = 3
ROWS = 3000
CONFIG = """
stores:
  pg: {{kind: postgres, dsn: "{dsn}"{store}}}
state: {{dsn: "{dsn}"}}
checks:
  c:
    source: {{store: pg, table: src, key: id, time: at, fields: {{label: label, amount: amount}}}}
    reader: {{store: pg, table: dst, key: id, time: at, fields: {{label: label, amount: amount}}}}
    fields: {{label: string, amount: decimal}}
    settle: 0s
    drilldown: {{leaf_rows: 40}}
    {extra}
"""


@pytest.fixture(scope="module")
async def tables(pg_database: str) -> AsyncIterator[str]:
    """Yield a DSN whose src and dst tables differ by 3 missing, 2 extra, 4 mismatched rows."""
    conn = await asyncpg.connect(pg_database)
    try:
        for name in ("src", "dst"):
            await conn.execute(
                f"CREATE TABLE {name} (id text, label text, amount numeric, at timestamptz)"
            )
            await conn.execute(
                f"INSERT INTO {name} SELECT 'k' || i, 'label é😀 ' || (i % 13), i / 100.0,"
                f" $1::timestamptz + (i * interval '{DAYS * 86400 // ROWS} seconds')"
                f" FROM generate_series(1, {ROWS}) AS i",
                T0,
            )
        await conn.execute(
            "DELETE FROM dst WHERE id IN ('k10', 'k1500', 'k2999');"
            "UPDATE dst SET label = label || '!' WHERE id IN ('k7', 'k700', 'k1700', 'k2700')"
        )
        await conn.execute(
            "INSERT INTO dst VALUES ('x1', 'ghost', 1, $1),"
            " ('x2', 'ghost', 2, $1 + interval '1 day')",
            T0 + timedelta(hours=5),
        )
        yield pg_database
    finally:
        await conn.close()


def _check(dsn: str, extra: str = "", store: str = "") -> Check:
    return load_text(CONFIG.format(dsn=dsn, extra=extra, store=store)).checks["c"]


@pytest.mark.parametrize(
    ("slots_first", "width"),
    [(False, None), (True, None), (False, 64)],
    ids=["days", "days+slots", "difference-digests"],
)
@pytest.mark.parametrize("extra", ["", "row_hash: md5"], ids=["auto", "md5"])
@pytest.mark.parametrize("parts", [1, 3], ids=["one-scan", "three-range-queries"])
async def test_a_run_finds_the_planted_drift_exactly_with_either_hash(
    tables: str, extra: str, slots_first: bool, width: int | None, parts: int
) -> None:
    """Whichever first pass, hash, and however many range queries the pass is split into."""
    check = _check(tables, extra, f", parallel_scans: {parts}" if parts > 1 else "")
    assert check.source.store.parallel_scans == parts
    assert check.row_hash == ("md5" if extra else "lookup3")
    end = T0 + timedelta(days=DAYS + 1)
    first = FirstPass(slots=slots_first, width=width)
    result = await reconcile_window(check, T0, end, checked=True, first=first)
    assert result.error is None
    assert result.to_dict()["row_hash"] == check.row_hash
    found = [sum(getattr(b, k) for b in result.buckets) for k in ("missing", "extra", "mismatched")]
    assert found == [3, 2, 4]
    assert sum(b.expected for b in result.buckets) == ROWS


async def test_the_preflight_probes_the_servers_lookup3(
    tables: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = await asyncpg.connect(tables)
    try:
        view = _check(tables).source
        assert (await pg_preflight.judge_row_hash(conn, view)).problems == ()
        # A server hashing otherwise (a big-endian one) is refused with what to set.
        monkeypatch.setattr(pg_preflight, "row_hash", lambda text, algorithm: 0)
        (problem,) = (await pg_preflight.judge_row_hash(conn, view)).problems
    finally:
        await conn.close()
    assert "differs from lookup3" in problem and "row_hash: md5" in problem


OS_CONFIG = (
    PG_OS_STORES
    + """\
  c:
    source: {{store: pg, table: src, key: id, time: at, fields: {{label: label, amount: amount}}}}
    reader: {{store: os, index: {index}, key: id, time: at}}
    fields: {{label: string, amount: decimal}}
    settle: 0s
    {extra}
"""
)


@pytest.mark.parametrize("width", [None, 64], ids=["days", "difference-digests"])
@pytest.mark.parametrize("extra", ["", "row_hash: md5"], ids=["auto", "md5"])
async def test_postgres_to_opensearch_finds_the_planted_drift_exactly_with_either_hash(
    tables: str,
    os_client: AsyncOpenSearch,
    os_index: Callable[[str], str],
    extra: str,
    width: int | None,
) -> None:
    rows = await pg_fetch(tables, "SELECT id, label, amount, at FROM dst")
    index = os_index("dg_rowhash")
    await load_index(
        os_client,
        index,
        {"id": "keyword", "label": "keyword", "amount": "keyword", "at": "date_nanos"},
        (
            {
                "_id": r["id"],
                "id": r["id"],
                "label": r["label"],
                "amount": str(Decimal(r["amount"]).normalize()),
                "at": r["at"].isoformat(),
            }
            for r in rows
        ),
        shards=2,
    )
    text = OS_CONFIG.format(dsn=tables, os=OS_URL, index=index, extra=extra)
    check = load_text(text).checks["c"]
    assert check.row_hash == ("md5" if extra else "lookup3")
    end = T0 + timedelta(days=DAYS + 1)
    result = await reconcile_window(check, T0, end, checked=True, first=FirstPass(width=width))
    assert result.error is None
    assert [b.status for b in result.buckets if b.status == "error"] == []
    found = [sum(getattr(b, k) for b in result.buckets) for k in ("missing", "extra", "mismatched")]
    assert found == [3, 2, 4]


async def test_a_nondeterministic_collation_does_not_fold_the_lookup3_hash(tables: str) -> None:
    # Under such a collation hashtextextended hashes a sort key ('A' and 'a' alike); the
    # dialect's COLLATE "C" makes it hash the bytes, as Python does.
    conn = await asyncpg.connect(tables)
    try:
        await conn.execute(
            "CREATE COLLATION IF NOT EXISTS dg_fold"
            " (provider = icu, locale = 'und-u-ks-level2', deterministic = false)"
        )
        for name, label in (("ci_src", "Label"), ("ci_dst", "label")):
            await conn.execute(
                f"CREATE TABLE {name} (id text COLLATE dg_fold, label text COLLATE dg_fold,"
                " at timestamptz)"
            )
            await conn.execute(f"INSERT INTO {name} VALUES ('k1', $1, $2)", label, T0)
        folded = await conn.fetchval(
            "SELECT hashtextextended('S5:Label' COLLATE dg_fold, 0)"
            " = hashtextextended('S5:label' COLLATE dg_fold, 0)"
        )
    finally:
        await conn.close()
    assert folded  # the trap is real on this server
    text = CONFIG.format(dsn=tables, extra="", store="").replace("table: src", "table: ci_src")
    text = text.replace("table: dst", "table: ci_dst").replace(", amount: amount", "")
    check = load_text(text.replace("amount: decimal", "")).checks["c"]
    end = T0 + timedelta(days=1)
    async with adapters(check) as (source, reader):
        rows = [r async for r in source.iter_rows(T0, end)]
        result = await reconcile(check, source, reader, T0, end, now=end + timedelta(days=1))
    assert check.row_hash == "lookup3"
    assert [r.row_hash for r in rows] == [row_hash("S2:k1S5:Label", "lookup3")]
    assert [b.mismatched for b in result.buckets] == [1]
