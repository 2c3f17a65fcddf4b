"""Rows with a NULL key count as one distinct key in PostgreSQL, as they do in Python."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from driftgauge.config import load_text
from driftgauge.encoding import digest
from driftgauge.stores import open_adapter

pytestmark = pytest.mark.integration

PG = os.environ.get("DRIFTGAUGE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:55432/postgres")
BASE = datetime(2026, 5, 1, tzinfo=UTC)
KEYS: list[str | None] = [None, None, "a", "a", "b", "B", "b "]

CONFIG = """
stores: {{pg: {{kind: postgres, dsn: "{dsn}"}}}}
state: {{dsn: "{dsn}"}}
checks:
  c:
    source: {{store: pg, table: t, key: k, time: ts}}
    reader: {{store: pg, table: t, key: k, time: ts}}
    fields: {{v: string}}
"""


@pytest.fixture
async def dsn() -> AsyncIterator[str]:
    """Yield a fresh database holding KEYS, one row each."""
    name = f"dg_nullkey_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = PG.rsplit("/", 1)[0] + "/" + name
    try:
        conn = await asyncpg.connect(url)
        await conn.execute("CREATE TABLE t (k text, v text, ts timestamptz)")
        await conn.copy_records_to_table("t", records=[
            (k, "x", BASE + timedelta(minutes=i)) for i, k in enumerate(KEYS)])
        await conn.close()
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_distinct_keys_match_python(dsn: str) -> None:
    check = load_text(CONFIG.format(dsn=dsn)).checks["c"]
    want = digest.aggregate(digest.hash_row(k, "string", ["x"], ["string"]) for k in KEYS)
    assert want.distinct_keys == 5          # NULL, a, b, B, "b " (case and space matter)
    adapter = await open_adapter(check.source)
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
