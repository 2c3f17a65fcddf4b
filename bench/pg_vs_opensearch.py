"""Benchmark PostgreSQL → OpenSearch: wall time, rows/s and the share spent in each store.

The source is the PostgreSQL table of `pg_vs_reladiff.py`; the reader is an OpenSearch
index loaded with the same rows and the same planted drift (0.1% missing, 0.01% extra,
0.05% mismatched over every day).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import asyncpg
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

sys.path.insert(0, str(Path(__file__).parent))
from pg_vs_reladiff import LAST_DAY, dsn, planted, prepare, run_measured

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address

OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
PY = sys.executable

CONFIG = """
stores:
  src: {{kind: postgres, dsn: "{src}", timeout_seconds: 600}}
  os: {{kind: opensearch, url: "{os}", timeout_seconds: 600}}
state: {{dsn: "{src}"}}
checks:
  tasks:
    source: {{store: src, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: os, index: {index}, key: task_id, time: completed_at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
"""


async def load_index(src: str, index: str, n: int) -> None:
    """Copy the source table into an index, then plant the drift; skip if already loaded."""
    client = AsyncOpenSearch(OS_URL, timeout=600)
    try:
        if await client.indices.exists(index=index):
            return
        await client.indices.create(
            index=index,
            body={
                "settings": {
                    "number_of_shards": 1,
                    "number_of_replicas": 0,
                    "refresh_interval": "-1",
                },
                "mappings": {
                    "properties": {
                        "task_id": {"type": "long"},
                        "label": {"type": "keyword"},
                        "completed_at": {"type": "date"},
                    }
                },
            },
        )
        conn = await asyncpg.connect(dsn(src))
        try:
            async with conn.transaction():
                batch: list[dict[str, Any]] = []
                async for r in conn.cursor("SELECT task_id, label, completed_at FROM tasks"):
                    i = r["task_id"]
                    if i % 1000 == 17:
                        continue  # missing
                    label = "changed" if i % 2000 == 503 else r["label"]  # mismatched
                    batch.append(
                        {
                            "_index": index,
                            "_id": str(i),
                            "_source": {
                                "task_id": i,
                                "label": label,
                                "completed_at": r["completed_at"].isoformat(),
                            },
                        }
                    )
                    if len(batch) >= 5000:
                        await async_bulk(client, batch, chunk_size=5000)
                        batch = []
                extra = planted(n).extra
                start = await conn.fetchval("SELECT min(completed_at) FROM tasks")
                span = await conn.fetchval(
                    "SELECT max(completed_at) - min(completed_at) FROM tasks"
                )
                for j in range(1, extra + 1):  # extra
                    when = start + span * ((j - 0.5) / extra)
                    batch.append(
                        {
                            "_index": index,
                            "_id": f"x{j}",
                            "_source": {
                                "task_id": n + j,
                                "label": "ghost",
                                "completed_at": when.isoformat(),
                            },
                        }
                    )
                await async_bulk(client, batch, chunk_size=5000)
        finally:
            await conn.close()
        await client.indices.put_settings(index=index, body={"refresh_interval": "1s"})
        await client.indices.refresh(index=index)
        await client.indices.forcemerge(index=index, max_num_segments=1)
    finally:
        await client.close()


def run(src: str, index: str) -> dict[str, Any]:
    """Run `driftgauge check` once and return its measurements."""
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write(CONFIG.format(src=dsn(src), os=OS_URL, index=index))
    cmd = [
        PY,
        "-m",
        "driftgauge.cli",
        "check",
        "tasks",
        "--config",
        f.name,
        "--no-store",
        "--json",
        "--since",
        "2026-01-01",
        "--until",
        LAST_DAY,
    ]
    wall, rss, out = run_measured(cmd)
    os.unlink(f.name)
    res = json.loads(out)
    b = res["buckets"]
    busy = res["source_seconds"] + res["reader_seconds"]
    return {
        "wall_s": round(wall, 2),
        "rss_mb": round(rss, 1),
        "found": {k: sum(x[k] for x in b) for k in ("missing", "extra", "mismatched")},
        "expected_rows": sum(x["expected"] for x in b),
        "rows_per_s": round(sum(x["expected"] for x in b) / wall),
        "queries": res["queries"],
        "rows_fetched": res["rows_fetched"],
        "share_source": round(res["source_seconds"] / busy, 2) if busy else None,
        "share_reader": round(res["reader_seconds"] / busy, 2) if busy else None,
    }


def main() -> None:
    """Load (once) and measure; print a JSON report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    src, _ = asyncio.run(prepare(args.rows, drift=True))
    index = f"dg-bench-{args.rows}"
    asyncio.run(load_index(src, index, args.rows))
    runs = [run(src, index) for _ in range(args.repeat)]
    runs.sort(key=lambda r: r["wall_s"])
    report = {
        "rows": args.rows,
        "planted": planted(args.rows).__dict__,
        "median": runs[len(runs) // 2],
        "min_wall_s": runs[0]["wall_s"],
        "max_wall_s": runs[-1]["wall_s"],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
