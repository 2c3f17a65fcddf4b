"""Benchmark one side's no-drift digest query on PostgreSQL with each row hash (md5, lookup3).

One process runs one query and exits, so farm-bench can pair the two hashes run by run:

    .venv/bin/python bench/pg_row_hash.py --prepare
    farm-bench -n 7 -- .venv/bin/python bench/pg_row_hash.py --shape narrow --hash lookup3 \\
        --vs '.venv/bin/python bench/pg_row_hash.py --shape narrow --hash md5'

Shapes (1,000,000 rows over 40 days each): `narrow` is the PostgreSQL bench's table (an
integer key and one short label, about 25 bytes of encoding a row); `wide` a text key and
five typed fields (string, integer, decimal, boolean, timestamp; about 110 bytes a row).
Queries: `floor` is the bare per-day count + digest of bench/pg_vs_reladiff.py with the
hash swapped; `days` is driftgauge's own day-bucket query (count, exact distinct keys,
digest) through the PostgreSQL adapter. Each run prints its in-process query seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address

from driftgauge.config.frozen import Field, View
from driftgauge.config.secrets import Secret
from driftgauge.core.fields import RowHashName
from driftgauge.stores.postgres.adapter import PostgresAdapter
from driftgauge.stores.postgres.dialect import ROW_HASHES
from driftgauge.stores.postgres.settings import PostgresStore

PG = address("DRIFTGAUGE_TEST_PG_DSN")
N = 1_000_000
DAYS = 40
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DATABASES = {"narrow": f"dg_bench_src_{N}", "wide": f"dg_bench_hashwide_{N}"}
NARROW = """
CREATE TABLE tasks (task_id bigint PRIMARY KEY, label text, completed_at timestamptz NOT NULL);
INSERT INTO tasks
SELECT i, 'label_' || (i % 7), timestamptz '2026-01-01 00:00:00+00'
       + (i - 1) * (interval '{days} days' / {n})
FROM generate_series(1, {n}) AS i;
"""
WIDE = """
CREATE TABLE orders (order_id text PRIMARY KEY, customer text, quantity bigint,
    amount numeric(12, 2), paid boolean, shipped_at timestamptz, placed_at timestamptz NOT NULL);
INSERT INTO orders
SELECT 'order-' || lpad(i::text, 9, '0'), 'customer ' || (i % 9973) || ' of région ' || (i % 17),
       i % 1000, (i % 100000) / 100.0, i % 3 = 0,
       timestamptz '2026-01-01 00:00:00+00' + (i - 1) * (interval '{days} days' / {n})
           + interval '36 hours',
       timestamptz '2026-01-01 00:00:00+00' + (i - 1) * (interval '{days} days' / {n})
FROM generate_series(1, {n}) AS i;
"""
ENCODINGS = {
    "narrow": (
        "tasks",
        "completed_at",
        "'I' || task_id || ';S' || char_length(label) || ':' || label",
    ),
    "wide": (
        "orders",
        "placed_at",
        "'S' || char_length(order_id) || ':' || order_id || 'S' || char_length(customer) || ':'"
        " || customer || 'I' || quantity || ';D' || trim_scale(amount)::text || ';'"
        " || CASE WHEN paid THEN 'T' ELSE 'F' END"
        " || 'M' || (extract(epoch FROM shipped_at) * 1000000)::bigint || ';'",
    ),
}


def dsn(db: str) -> str:
    """Return the local server's DSN for one database."""
    return PG.rsplit("/", 1)[0] + "/" + db


async def prepare() -> None:
    """Create the shapes' databases once (the narrow one is the PostgreSQL bench's source)."""
    admin = await asyncpg.connect(PG)
    try:
        existing = {r["datname"] for r in await admin.fetch("SELECT datname FROM pg_database")}
        for shape, db in DATABASES.items():
            if db in existing:
                continue
            await admin.execute(f'CREATE DATABASE "{db}"')
            conn = await asyncpg.connect(dsn(db))
            try:
                await conn.execute((NARROW if shape == "narrow" else WIDE).format(n=N, days=DAYS))
                table, t, _ = ENCODINGS[shape]
                await conn.execute(f"CREATE INDEX ON {table} ({t})")
                await conn.execute(f"VACUUM ANALYZE {table}")
            finally:
                await conn.close()
    finally:
        await admin.close()


def view(shape: str, row_hash: RowHashName) -> View:
    """Return driftgauge's view of a shape's table, hashing rows with `row_hash`."""
    store = PostgresStore(name=shape, dsn=Secret(dsn(DATABASES[shape])), timeout=600, pool_max=1)
    if shape == "narrow":
        key, key_type, t = "task_id", "integer", "completed_at"
        fields = [("label", "string")]
    else:
        key, key_type, t = "order_id", "string", "placed_at"
        fields = [
            ("customer", "string"),
            ("quantity", "integer"),
            ("amount", "decimal"),
            ("paid", "boolean"),
            ("shipped_at", "timestamp"),
        ]
    return View(
        store=store,
        key_column=key,
        time_column=t,
        columns=tuple(c for c, _ in fields),
        fields=tuple(Field(c, typ) for c, typ in fields),  # type: ignore[arg-type]
        key_type=key_type,  # type: ignore[arg-type]
        timezone=ZoneInfo("UTC"),
        table=ENCODINGS[shape][0],
        row_hash=row_hash,
    )


async def one(shape: str, row_hash: RowHashName, query: str) -> dict[str, object]:
    """Run one query of a shape with one hash; return its seconds and buckets."""
    start, end = T0, T0 + timedelta(days=DAYS)
    if query == "days":
        adapter = await PostgresAdapter.open(view(shape, row_hash))
        try:
            t0 = time.perf_counter()
            buckets = await adapter.bucket_digests(start, end, "day")
            seconds = time.perf_counter() - t0
        finally:
            await adapter.close()
        return {"seconds": round(seconds, 3), "buckets": len(buckets)}
    table, t, enc = ENCODINGS[shape]
    sql = (
        f"SELECT date_trunc('day', {t}, 'UTC') AS day, count(*), "
        f"sum({ROW_HASHES[row_hash].format(enc)}) FROM {table} GROUP BY 1"
    )
    conn = await asyncpg.connect(dsn(DATABASES[shape]))
    try:
        t0 = time.perf_counter()
        rows = await conn.fetch(sql, timeout=600)
        seconds = time.perf_counter() - t0
    finally:
        await conn.close()
    return {"seconds": round(seconds, 3), "buckets": len(rows)}


def main() -> None:
    """Prepare the shapes, or run one query and print a JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--prepare", action="store_true")
    ap.add_argument("--shape", choices=sorted(DATABASES), default="narrow")
    ap.add_argument("--hash", choices=["md5", "lookup3"], default="lookup3")
    ap.add_argument("--query", choices=["floor", "days"], default="floor")
    args = ap.parse_args()
    if args.prepare:
        asyncio.run(prepare())
        return
    report = asyncio.run(one(args.shape, args.hash, args.query))
    print(json.dumps({"shape": args.shape, "hash": args.hash, "query": args.query} | report))


if __name__ == "__main__":
    main()
