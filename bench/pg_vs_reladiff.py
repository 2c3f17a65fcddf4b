"""Benchmark PostgreSQL → PostgreSQL: driftgauge against reladiff (hashdiff) and the floor.

Two databases hold the same N tasks over 40 days; the reader copy has planted drift
(0.1% missing, 0.01% extra, 0.05% mismatched) spread over every day. Each tool runs as
its own process so wall time and peak RSS are measured alike.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
PG = address("DRIFTGAUGE_TEST_PG_DSN")
DAYS = 40
LAST_DAY = (date(2026, 1, 1) + timedelta(days=DAYS - 1)).isoformat()
LEAF = int(os.environ.get("BENCH_LEAF_ROWS", "2000"))


def dsn(db: str) -> str:
    """Return the local server's DSN for one database."""
    return PG.rsplit("/", 1)[0] + "/" + db


GEN = """
CREATE TABLE tasks (task_id bigint PRIMARY KEY, label text, completed_at timestamptz NOT NULL);
INSERT INTO tasks
SELECT i, 'label_' || (i % 7), timestamptz '2026-01-01 00:00:00+00'
       + (i - 1) * (interval '{days} days' / {n})
FROM generate_series(1, {n}) AS i;
"""
DRIFT = """
DELETE FROM tasks WHERE task_id % 1000 = 17;
UPDATE tasks SET label = 'changed' WHERE task_id % 2000 = 503;
INSERT INTO tasks
SELECT {n} + j, 'ghost', timestamptz '2026-01-01 00:00:00+00'
       + (j - 0.5) * (interval '{days} days' / {extra})
FROM generate_series(1, {extra}) AS j;
"""


@dataclass
class Planted:
    """The drift the generator plants, computed from its arithmetic."""

    missing: int
    extra: int
    mismatched: int


def planted(n: int) -> Planted:
    """Return the planted counts for n rows."""
    return Planted(
        missing=sum(1 for i in range(17, n + 1, 1000)),
        extra=max(n // 10000, 1),
        mismatched=sum(1 for i in range(503, n + 1, 2000)),
    )


async def prepare(n: int, drift: bool) -> tuple[str, str]:
    """Create the source and reader databases with n rows; return their names."""
    src, dst = f"dg_bench_src_{n}", f"dg_bench_dst_{n}_{'drift' if drift else 'clean'}"
    admin = await asyncpg.connect(PG)
    try:
        existing = {r["datname"] for r in await admin.fetch("SELECT datname FROM pg_database")}
        for db in (src, dst):
            if db in existing:
                continue
            await admin.execute(f'CREATE DATABASE "{db}"')
            conn = await asyncpg.connect(dsn(db))
            try:
                await conn.execute(GEN.format(n=n, days=DAYS))
                if db == dst and drift:
                    await conn.execute(DRIFT.format(n=n, days=DAYS, extra=planted(n).extra))
                await conn.execute("CREATE INDEX ON tasks (completed_at)")
                await conn.execute("VACUUM ANALYZE tasks")
            finally:
                await conn.close()
    finally:
        await admin.close()
    return src, dst


CONFIG = """
stores:
  src: {{kind: postgres, dsn: "{src}", timeout_seconds: 600}}
  dst: {{kind: postgres, dsn: "{dst}", timeout_seconds: 600}}
state: {{dsn: "{src}"}}
checks:
  tasks:
    source: {{store: src, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: dst, table: tasks, key: task_id, time: completed_at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
    drilldown: {{leaf_rows: {leaf}}}
"""


# A fresh wrapper per run, so the peak RSS reported is this run's alone.
WRAP = (
    "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
    "print('maxrss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
    "file=sys.stderr); sys.exit(p.returncode)"
)


def run_measured(cmd: list[str]) -> tuple[float, float, str]:
    """Run a command; return wall seconds, its peak RSS in MB and its stdout."""
    # An installed wheel carries compiled bytecode; an editable checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would compile every module again in every timed run (~80 ms).
    compileall.compile_dir(ROOT / "service" / "driftgauge", quiet=1)
    t0 = time.perf_counter()
    proc = subprocess.run([PY, "-c", WRAP, *cmd], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rss_kb = next(
        int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("maxrss_kb")
    )
    return wall, rss_kb / 1024, proc.stdout


def driftgauge(src: str, dst: str, first_pass: str) -> tuple[float, float, Planted]:
    """Run `driftgauge check` over the 40 days and return wall, RSS and its counts.

    `first_pass` pins what the service's auto choice picks from its stored verdicts:
    "slots" when no day of the window was judged yet or the last verdict of one is drift,
    "days" when the judged days were all healthy.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write(CONFIG.format(src=dsn(src), dst=dsn(dst), leaf=LEAF))
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
        "--first-pass",
        first_pass,
    ]
    wall, rss, out = run_measured(cmd)
    os.unlink(f.name)
    buckets = json.loads(out)["buckets"]
    return (
        wall,
        rss,
        Planted(
            sum(b["missing"] for b in buckets),
            sum(b["extra"] for b in buckets),
            sum(b["mismatched"] for b in buckets),
        ),
    )


RELADIFF = """
import json, sys, reladiff
a = reladiff.connect_to_table(sys.argv[1], "tasks", "task_id")
b = reladiff.connect_to_table(sys.argv[2], "tasks", "task_id")
minus, plus = set(), set()
for sign, row in reladiff.diff_tables(a, b, extra_columns=("label", "completed_at"),
                                      algorithm=reladiff.Algorithm.HASHDIFF):
    (minus if sign == "-" else plus).add(row[0])
print(json.dumps({"missing": len(minus - plus), "extra": len(plus - minus),
                  "mismatched": len(minus & plus)}))
"""


def reladiff_run(src: str, dst: str) -> tuple[float, float, Planted]:
    """Run reladiff's hashdiff on the same two tables."""
    wall, rss, out = run_measured([PY, "-c", RELADIFF, dsn(src), dsn(dst)])
    got = json.loads(out.strip().splitlines()[-1])
    return wall, rss, Planted(got["missing"], got["extra"], got["mismatched"])


FLOOR_SQL = """
SELECT date_trunc('day', completed_at, 'UTC') AS day, count(*),
       sum(('x' || left(md5('I' || task_id || ';' || 'S' || char_length(label) || ':' || label),
                        16))::bit(64)::bigint)
FROM tasks GROUP BY 1
"""


async def floor(src: str, dst: str) -> float:
    """Return the wall time of one per-day count + digest query per side, run concurrently."""
    a, b = await asyncpg.connect(dsn(src)), await asyncpg.connect(dsn(dst))
    try:
        t0 = time.perf_counter()
        await asyncio.gather(a.fetch(FLOOR_SQL), b.fetch(FLOOR_SQL))
        return time.perf_counter() - t0
    finally:
        await a.close()
        await b.close()


def median(xs: list[float]) -> float:
    """Return the median."""
    s = sorted(xs)
    return s[len(s) // 2]


def main() -> None:
    """Run the comparison and print a JSON report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-reladiff", action="store_true")
    args = ap.parse_args()
    n = args.rows
    expect = planted(n)
    src, dst = asyncio.run(prepare(n, drift=True))
    _, clean = asyncio.run(prepare(n, drift=False))
    report: dict[str, object] = {"rows": n, "planted": expect.__dict__}
    # (report key, reader database, first pass): drift on a first run or on a run after
    # one that found drift; drift in days last judged healthy; a healthy check; a first
    # run on a healthy table, or the first run after a repair (slots paid once).
    for key, reader, first_pass in (
        ("driftgauge_drift", dst, "slots"),
        ("driftgauge_drift_new", dst, "days"),
        ("driftgauge_clean", clean, "days"),
        ("driftgauge_clean_slots", clean, "slots"),
    ):
        dg = [driftgauge(src, reader, first_pass) for _ in range(args.repeat)]
        report[key] = {
            "wall_s": median([d[0] for d in dg]),
            "rss_mb": max(d[1] for d in dg),
            "found": dg[0][2].__dict__,
            "first_pass": first_pass,
        }
    report["floor_s"] = median([asyncio.run(floor(src, clean)) for _ in range(args.repeat)])
    if not args.skip_reladiff:
        rd = [reladiff_run(src, dst) for _ in range(max(1, args.repeat - 1))]
        report["reladiff_drift"] = {
            "wall_s": median([r[0] for r in rd]),
            "rss_mb": max(r[1] for r in rd),
            "found": rd[0][2].__dict__,
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
