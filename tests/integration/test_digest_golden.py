"""Each golden vector computed by the real PostgreSQL and the real OpenSearch equals Python."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.config.runtime import View
from driftgauge.core.aggregate import Aggregate
from driftgauge.stores import open_adapter
from driftgauge.stores.base import RowHash
from driftgauge.stores.opensearch import requests as rq
from driftgauge.stores.postgres import dialect as pg_sql
from tests.integration.conftest import TIMEOUT, make_view, os_store, pg_store

pytestmark = pytest.mark.integration

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "golden" / "digest_vectors.json").read_text(encoding="utf-8")
)["vectors"]
T0 = datetime(2024, 1, 1, tzinfo=UTC)
WINDOW = (T0 - timedelta(days=1), T0 + timedelta(days=1))
PG_TYPES = {"string": "text", "integer": "bigint", "decimal": "numeric", "boolean": "boolean"}
IDS = [v["name"] for v in VECTORS]


def _pg_type(type_: str, value: Any) -> str:
    if type_ != "timestamp":
        return PG_TYPES[type_]
    if value is not None and datetime.fromisoformat(value).tzinfo is None:
        return "timestamp"  # without time zone: must read as UTC
    return "timestamptz"


def _literal(value: Any, type_: str) -> str:
    pg_type = _pg_type(type_, value)
    if value is None:
        return f"NULL::{pg_type}"
    if type_ == "boolean":
        return "TRUE" if value else "FALSE"
    return "'" + str(value).replace("'", "''") + f"'::{pg_type}"


def _pg_view(dsn: str, vector: dict[str, Any]) -> View:
    """Return a view over a one-row VALUES query holding the vector with real column types."""
    cols = [_literal(vector["key"], vector["key_type"]), f"'{T0.isoformat()}'::timestamptz"]
    cols += [_literal(f["value"], f["type"]) for f in vector["fields"]]
    names = ["k", "t"] + [f"c{i}" for i in range(len(vector["fields"]))]
    query = f"SELECT * FROM (VALUES ({', '.join(cols)})) AS v({', '.join(names)})"
    return make_view(pg_store(dsn), key="k", time="t", key_type=vector["key_type"],
                     fields={f"c{i}": (f"c{i}", f["type"]) for i, f in enumerate(vector["fields"])},
                     query=query, timestamp_precision=vector.get("precision", "us"))


async def _one_row(view: View) -> RowHash:
    adapter = await open_adapter(view)
    try:
        rows = [r async for r in adapter.iter_rows(*WINDOW)]
        buckets = await adapter.bucket_digests(*WINDOW, "day")
    finally:
        await adapter.close()
    assert len(rows) == 1
    assert [b.agg for b in buckets] == [Aggregate(1, 1, rows[0].row_hash)]
    return rows[0]


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
async def test_postgres_matches_golden(pg_database: str, vector: dict[str, Any]) -> None:
    view = _pg_view(pg_database, vector)
    conn = await asyncpg.connect(pg_database, timeout=TIMEOUT,
                                 server_settings={"TimeZone": "UTC"})
    try:
        encoding = await conn.fetchval(
            f"SELECT {pg_sql.row_encoding_sql(view)} FROM {pg_sql.relation(view)}")
    finally:
        await conn.close()
    assert encoding == vector["encoding"]
    row = await _one_row(view)
    assert (row.key_hash, row.row_hash) == (vector["key_hash"], int(vector["row_hash"]))
    assert row.key == (vector["key"] if vector["key_type"] == "string" else str(vector["key"]))
    assert row.event_time == T0


def _os_column(i: int, field: dict[str, Any], *, double: bool) -> str:
    value = field["value"]
    if field["type"] == "timestamp" and value is not None and value.startswith("1969"):
        return f"f{i}_tsms"  # date_nanos cannot hold instants before 1970
    if field["type"] == "decimal" and double:
        return f"f{i}_decdouble"
    return f"f{i}_{field['type']}"


def _double_safe(value: str | None) -> bool:
    """Return True when a double holds the decimal exactly as its shortest repr."""
    if value is None:
        return True
    number = Decimal(value)
    return number.is_finite() and Decimal(repr(float(number))) == number


@pytest.fixture(scope="module")
async def golden_index(os_client: AsyncOpenSearch,
                       os_index: Callable[[str], str]) -> AsyncIterator[str]:
    """Yield an index with one document per golden vector, typed by dynamic templates."""
    name = os_index("dg_golden")
    templates = [
        ("*_string", "keyword"), ("*_decimal", "keyword"), ("*_decdouble", "double"),
        ("*_integer", "long"), ("*_boolean", "boolean"), ("*_timestamp", "date_nanos"),
        ("*_tsms", "date"),
    ]
    await os_client.indices.create(index=name, body={
        "settings": {"number_of_shards": 2, "number_of_replicas": 0},
        "mappings": {
            "dynamic_templates": [{m: {"match": m, "mapping": {"type": t}}} for m, t in templates],
            "properties": {"vid": {"type": "keyword"}, "t": {"type": "date"},
                           "key_string": {"type": "keyword"}, "key_integer": {"type": "long"}},
        }})
    docs = []
    for n, v in enumerate(VECTORS):
        doc: dict[str, Any] = {"vid": str(n), "t": T0.isoformat(), f"key_{v['key_type']}": v["key"]}
        for i, f in enumerate(v["fields"]):
            if f["value"] is None:
                continue  # a missing field is NULL
            doc[_os_column(i, f, double=False)] = f["value"]
            if f["type"] == "decimal" and _double_safe(f["value"]):
                doc[_os_column(i, f, double=True)] = float(f["value"])
        docs.append({"_index": name, "_source": doc})
    await async_bulk(os_client, docs, refresh=True)
    yield name


def _os_view(index: str, n: int, vector: dict[str, Any], *, double: bool) -> View:
    return make_view(
        os_store(), key=f"key_{vector['key_type']}", time="t", key_type=vector["key_type"],
        fields={f"c{i}": (_os_column(i, f, double=double), f["type"])
                for i, f in enumerate(vector["fields"])},
        index=index, filter={"term": {"vid": str(n)}},
        timestamp_precision=vector.get("precision", "us"))


@pytest.mark.parametrize("n", range(len(VECTORS)), ids=IDS)
async def test_opensearch_matches_golden(os_client: AsyncOpenSearch, golden_index: str,
                                         n: int) -> None:
    vector = VECTORS[n]
    view = _os_view(golden_index, n, vector, double=False)
    body = rq.rows_body(view, *WINDOW, None, size=1, encoding=True)
    resp = await os_client.search(index=golden_index, body=body)
    assert resp["hits"]["hits"][0]["fields"]["r"][0]["encoding"] == vector["encoding"]
    row = await _one_row(view)
    assert (row.key_hash, row.row_hash) == (vector["key_hash"], int(vector["row_hash"]))
    assert row.key == (vector["key"] if vector["key_type"] == "string" else str(vector["key"]))
    assert row.event_time == T0


DOUBLE_SAFE = [n for n, v in enumerate(VECTORS)
               if any(f["type"] == "decimal" for f in v["fields"])
               and all(_double_safe(f["value"]) for f in v["fields"] if f["type"] == "decimal")]


@pytest.mark.parametrize("n", DOUBLE_SAFE, ids=[IDS[n] for n in DOUBLE_SAFE])
async def test_opensearch_double_decimals_match_golden(golden_index: str, n: int) -> None:
    vector = VECTORS[n]
    row = await _one_row(_os_view(golden_index, n, vector, double=True))
    assert row.row_hash == int(vector["row_hash"])


def test_some_decimal_vectors_exceed_a_double() -> None:
    assert len(DOUBLE_SAFE) < sum(
        any(f["type"] == "decimal" for f in v["fields"]) for v in VECTORS)
