"""Each golden vector computed by every kind equals Python."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from driftgauge.core.aggregate import Aggregate
from driftgauge.stores import open_adapter
from driftgauge.stores.base import RowHash, StoreAdapter
from driftgauge.stores.registry import LOOKUP3_ROW_HASH
from tests.conformance.spec import DOUBLE_DECIMALS, ENGINE_ENCODING, Golden, Kind, double_safe

pytestmark = pytest.mark.integration

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "golden" / "digest_vectors.json").read_text(encoding="utf-8")
)["vectors"]
LOOKUP3: dict[str, str] = json.loads(
    (Path(__file__).parents[1] / "golden" / "row_hash_vectors.json").read_text(encoding="utf-8")
)["lookup3"]
T0 = datetime(2024, 1, 1, tzinfo=UTC)
WINDOW = (T0 - timedelta(days=1), T0 + timedelta(days=1))
IDS = [v["name"] for v in VECTORS]


@pytest.fixture(scope="module")
async def golden(kind: Kind) -> AsyncIterator[Golden]:
    """Yield one stored row per vector in the kind."""
    stored = await kind.fixtures.golden(VECTORS, T0)
    try:
        yield stored
    finally:
        await stored.drop()


async def _one_row(adapter: StoreAdapter) -> RowHash:
    try:
        rows = [r async for r in adapter.iter_rows(*WINDOW)]
        buckets = await adapter.bucket_digests(*WINDOW, "day")
    finally:
        await adapter.close()
    assert len(rows) == 1
    assert [b.agg for b in buckets] == [Aggregate(1, 1, rows[0].row_hash)]
    return rows[0]


@pytest.mark.parametrize("n", range(len(VECTORS)), ids=IDS)
async def test_engine_encoding_matches_golden(kind: Kind, golden: Golden, n: int) -> None:
    kind.require(ENGINE_ENCODING)
    assert await golden.encoding(n) == VECTORS[n]["encoding"]


@pytest.mark.parametrize("n", range(len(VECTORS)), ids=IDS)
async def test_row_matches_golden(golden: Golden, n: int) -> None:
    vector = VECTORS[n]
    row = await _one_row(await golden.open(n, double=False))
    assert (row.key_hash, row.row_hash) == (vector["key_hash"], int(vector["row_hash"]))
    assert row.key == (vector["key"] if vector["key_type"] == "string" else str(vector["key"]))
    assert row.event_time == T0


@pytest.mark.parametrize("n", range(len(VECTORS)), ids=IDS)
async def test_lookup3_row_matches_golden(kind: Kind, golden: Golden, n: int) -> None:
    kind.require(LOOKUP3_ROW_HASH)
    vector = VECTORS[n]
    md5 = await golden.open(n, double=False)
    view = md5.view  # type: ignore[attr-defined]
    await md5.close()
    row = await _one_row(await open_adapter(replace(view, row_hash="lookup3")))
    # The key hash stays md5's: drill-down prefixes do not depend on the row hash.
    assert (row.key_hash, row.row_hash) == (vector["key_hash"], int(LOOKUP3[vector["name"]]))


DOUBLE_SAFE = [
    n
    for n, v in enumerate(VECTORS)
    if any(f["type"] == "decimal" for f in v["fields"])
    and all(double_safe(f["value"]) for f in v["fields"] if f["type"] == "decimal")
]


@pytest.mark.parametrize("n", DOUBLE_SAFE, ids=[IDS[n] for n in DOUBLE_SAFE])
async def test_double_decimals_match_golden(kind: Kind, golden: Golden, n: int) -> None:
    kind.require(DOUBLE_DECIMALS)
    vector = VECTORS[n]
    row = await _one_row(await golden.open(n, double=True))
    assert row.row_hash == int(vector["row_hash"])


def test_some_decimal_vectors_exceed_a_double() -> None:
    assert len(DOUBLE_SAFE) < sum(any(f["type"] == "decimal" for f in v["fields"]) for v in VECTORS)
