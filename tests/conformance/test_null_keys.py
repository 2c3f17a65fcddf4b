"""Rows with a NULL key count as one distinct key in every kind, as they do in Python."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from driftgauge.encoding import digest
from tests.conformance.spec import Kind, Spec, Store, Table

pytestmark = pytest.mark.integration

BASE = datetime(2026, 5, 1, tzinfo=UTC)
KEYS: list[str | None] = [None, None, "a", "a", "b", "B", "b "]
NULL_KEYS = Table(
    name="nullkeys",
    columns=(("k", "key"), ("v", "text"), ("ts", "instant")),
    rows=[(k, "x", BASE + timedelta(minutes=i)) for i, k in enumerate(KEYS)],
    shards=1,
)


async def test_distinct_keys_match_python(kind: Kind, stored: Store) -> None:
    source = await stored(kind, NULL_KEYS)
    want = digest.aggregate(digest.hash_row(k, "string", ["x"], ["string"]) for k in KEYS)
    assert want.distinct_keys == 5  # NULL, a, b, B, "b " (case and space matter)
    adapter = await source.open(Spec(key="k", time="ts", fields={"v": ("v", "string")}))
    try:
        end = BASE + timedelta(days=1)
        (day,) = await adapter.bucket_digests(BASE, end, "day")
        slots = await adapter.slot_digests(BASE, end, 3600)
        prefixes = await adapter.prefix_digests(BASE, end, 1)
    finally:
        await adapter.close()
    assert day.agg == want
    assert slots[0].agg == want
    assert sum(a.distinct_keys for a in prefixes.values()) == want.distinct_keys
