"""Benchmark difference digests, PostgreSQL → PostgreSQL, with farm-bench pairing the runs.

One source of N tasks over 40 days and three readers: a clean copy, drift spread evenly
over ids (1,000 missing, 100 extra, 500 mismatched at 1M rows, as pg_vs_reladiff plants)
and the same counts dense in 3 days. Each driftgauge run is a stored `driftgauge check`
(state in its own database), so the digests are sized from the previous run as the
service sizes them; farm-bench's warm-up run is that previous run. Pairs, run A B A B:

  spread vs clean, dense vs clean   (what drift costs over a healthy check)
  spread vs reladiff, dense vs reladiff   (reladiff 0.6.0 hashdiff on the same tables)

Every driftgauge run's JSON is kept and its counts checked against the planted drift.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import asyncpg

from pg_vs_reladiff import DAYS, GEN, LAST_DAY, PG, PY, RELADIFF, dsn, planted, prepare

ROOT = Path(__file__).resolve().parents[1]
STATE = "dg_bench_state_digests"
DENSE = """
DELETE FROM tasks WHERE task_id >= {lo} AND task_id < {hi} AND task_id % {m} = 17;
UPDATE tasks SET label = 'changed'
WHERE task_id >= {lo} AND task_id < {hi} AND task_id % {u} = {u2};
INSERT INTO tasks
SELECT {n} + j, 'ghost', timestamptz '2026-01-11 00:00:00+00' + j * (interval '3 days' / 101)
FROM generate_series(1, 100) AS j;
"""
CONFIG = """
stores:
  src: {{kind: postgres, dsn: "{src}", timeout_seconds: 900}}
{readers}
state: {{dsn: "{state}"}}
checks:
{checks}
"""
CHECK = """  tasks_{name}:
    source: {{store: src, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: r_{name}, table: tasks, key: task_id, time: completed_at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
"""


async def dense_reader(n: int) -> str:
    """Create the reader with the drift in days 11 to 13 of 40; return its database."""
    db = f"dg_bench_dst_{n}_dense"
    admin = await asyncpg.connect(PG)
    try:
        if await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", db):
            return db
        await admin.execute(f'CREATE DATABASE "{db}"')
    finally:
        await admin.close()
    lo, hi = n * 10 // DAYS, n * 13 // DAYS
    conn = await asyncpg.connect(dsn(db))
    try:
        await conn.execute(GEN.format(n=n, days=DAYS))
        p = planted(n)
        m = max((hi - lo) // p.missing, 2)
        u = max((hi - lo) // p.mismatched, 2)
        await conn.execute(DENSE.format(lo=lo, hi=hi, m=m, u=u, u2=u // 2 + 3, n=n))
        await conn.execute("CREATE INDEX ON tasks (completed_at)")
        await conn.execute("VACUUM ANALYZE tasks")
    finally:
        await conn.close()
    return db


async def state_database() -> None:
    """Create the state database once (the runs migrate it)."""
    admin = await asyncpg.connect(PG)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", STATE):
            await admin.execute(f'CREATE DATABASE "{STATE}"')
    finally:
        await admin.close()


def check_cmd(config: str, name: str, out: str) -> list[str]:
    """Return a stored `driftgauge check` whose JSON is appended to `out`."""
    cli = (
        f"exec {PY} -m driftgauge.cli check tasks_{name} --config {config} --json "
        f"--since 2026-01-01 --until {LAST_DAY} >>{out} 2>/dev/null"
    )
    return ["sh", "-c", cli]


def farm(a: list[str], b: list[str], runs: int) -> str:
    """Return farm-bench's report of A against B, paired."""
    cmd = ["farm-bench", "-n", str(runs), "--timeout", "3000", "--vs", shlex.join(b), "--", *a]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def found(out: str) -> list[dict[str, int]]:
    """Return the drift counts of every run's JSON appended to `out`."""
    text = Path(out).read_text()
    runs, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth, start = depth + 1, start if depth else i
        elif ch == "}":
            depth -= 1
            if depth == 0:
                b = json.loads(text[start : i + 1])["buckets"]
                runs.append(
                    {k: sum(x[k] for x in b) for k in ("missing", "extra", "mismatched")}
                    | {"queries": json.loads(text[start : i + 1])["queries"]}
                )
    return runs


def main() -> None:
    """Prepare the databases, run the pairs and print farm-bench's reports and the counts."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    n = args.rows
    src, spread = asyncio.run(prepare(n, drift=True))
    _, clean = asyncio.run(prepare(n, drift=False))
    dense = asyncio.run(dense_reader(n))
    asyncio.run(state_database())
    readers = {"clean": clean, "spread": spread, "dense": dense}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write(
            CONFIG.format(
                src=dsn(src),
                state=dsn(STATE),
                readers="\n".join(
                    f'  r_{k}: {{kind: postgres, dsn: "{dsn(v)}", timeout_seconds: 900}}'
                    for k, v in readers.items()
                ),
                checks="".join(CHECK.format(name=k) for k in readers),
            )
        )
    env_path = str(ROOT / "service")
    os.environ["PYTHONPATH"] = env_path + os.pathsep + os.environ.get("PYTHONPATH", "")
    tmp = tempfile.mkdtemp(prefix="dg_digests_")
    print(f"planted (spread and dense): {planted(n).__dict__}", flush=True)
    for name in ("spread", "dense"):
        out_a, out_b = f"{tmp}/{name}.json", f"{tmp}/{name}_clean.json"
        print(f"== {name} vs clean", flush=True)
        print(
            farm(check_cmd(f.name, name, out_a), check_cmd(f.name, "clean", out_b), args.runs),
            flush=True,
        )
        print(f"found ({name}, every run): {found(out_a)}", flush=True)
        print(f"found (clean, every run): {found(out_b)}", flush=True)
        print(f"== {name} vs reladiff 0.6.0 hashdiff", flush=True)
        rd_out = f"{tmp}/{name}_reladiff.json"
        rd = ["sh", "-c", f"exec {PY} -c '{RELADIFF}' {dsn(src)} {dsn(readers[name])} >>{rd_out}"]
        print(farm(check_cmd(f.name, name, out_a), rd, args.runs), flush=True)
        print(f"reladiff found: {Path(rd_out).read_text().splitlines()[-1]}", flush=True)
    os.unlink(f.name)


if __name__ == "__main__":
    sys.exit(main())
