"""Benchmark PG → MariaDB, MariaDB → MariaDB and PG → DuckDB: driftgauge against reladiff.

The source is bench/pg_vs_reladiff.py's table of N tasks over 40 days (in PostgreSQL, and
the same rows in a MariaDB database); each reader holds the same tasks with 1000 missing,
100 extra and 500 mismatched rows planted in one of two shapes:

- spread: pg_vs_reladiff's arithmetic, drift on every day (ids % 1000 = 17 missing, ...);
- cluster: the same counts inside three hours of one day (3000 consecutive ids).

`prepare` builds every database and file once and writes one driftgauge config per
(pair, shape) into --dir; each tool then runs as a process of its own, so the two can be
timed run by run against each other:

    .venv/bin/python bench/pg_vs_mariadb.py prepare [--rows 1000000] [--dir DIR]
    .venv/bin/python -m driftgauge.cli check tasks --config DIR/pg-mariadb-spread.yml \\
        --no-store --json --since 2026-01-01 --until 2026-02-09 --first-pass slots
    RELADIFF_PYTHON bench/pg_vs_mariadb.py reladiff SOURCE_URL READER_URL
    .venv/bin/python bench/pg_vs_mariadb.py counts --shape spread FILE...

reladiff needs its own environment (reladiff 0.6.0 with mysql-connector-python,
psycopg2 and duckdb); `reladiff` imports nothing else from here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

PAIRS = ("pg-mariadb", "mariadb-mariadb", "pg-duckdb")
SHAPES = ("spread", "cluster")
MY = "mysql://root@127.0.0.1:53306"
DAYS = 40
CLUSTER_AT_US = (19 * 86400 + 10 * 3600) * 1_000_000
"""The cluster's drift starts at 2026-01-20 10:00 UTC."""
CLUSTER_IDS = 3000

MY_GEN = """
CREATE TABLE tasks (task_id BIGINT PRIMARY KEY, label VARCHAR(32) CHARACTER SET utf8mb4,
                    completed_at DATETIME(6) NOT NULL, INDEX (completed_at));
INSERT INTO tasks SELECT seq, CONCAT('label_', seq % 7),
       TIMESTAMPADD(MICROSECOND, (seq - 1) * {step}, '2026-01-01 00:00:00')
FROM seq_1_to_{n};
"""
MY_SPREAD = """
DELETE FROM tasks WHERE task_id % 1000 = 17;
UPDATE tasks SET label = 'changed' WHERE task_id % 2000 = 503;
INSERT INTO tasks SELECT {n} + seq, 'ghost',
       TIMESTAMPADD(MICROSECOND, (2 * seq - 1) * {half_gap}, '2026-01-01 00:00:00')
FROM seq_1_to_{extra};
"""
MY_CLUSTER = """
DELETE FROM tasks WHERE task_id BETWEEN {lo} AND {hi} AND (task_id - {lo}) % 3 = 0;
UPDATE tasks SET label = 'changed' WHERE task_id BETWEEN {lo} AND {hi}
       AND (task_id - {lo}) % 6 = 1;
INSERT INTO tasks SELECT {n} + seq, 'ghost',
       TIMESTAMPADD(MICROSECOND, {at} + seq * 30000000, '2026-01-01 00:00:00')
FROM seq_1_to_100;
"""
DUCK_GEN = """
SET TimeZone = 'UTC';
CREATE TABLE tasks AS
SELECT i AS task_id, 'label_' || (i % 7) AS label,
       make_timestamptz(epoch_us(TIMESTAMPTZ '2026-01-01 00:00:00+00') + (i - 1) * {step})
       AS completed_at
FROM range(1, {n} + 1) AS r(i);
"""
DUCK_SPREAD = """
DELETE FROM tasks WHERE task_id % 1000 = 17;
UPDATE tasks SET label = 'changed' WHERE task_id % 2000 = 503;
INSERT INTO tasks SELECT {n} + j, 'ghost',
       make_timestamptz(epoch_us(TIMESTAMPTZ '2026-01-01 00:00:00+00') + (2 * j - 1) * {half_gap})
FROM range(1, {extra} + 1) AS r(j);
"""
DUCK_CLUSTER = """
DELETE FROM tasks WHERE task_id BETWEEN {lo} AND {hi} AND (task_id - {lo}) % 3 = 0;
UPDATE tasks SET label = 'changed' WHERE task_id BETWEEN {lo} AND {hi}
       AND (task_id - {lo}) % 6 = 1;
INSERT INTO tasks SELECT {n} + j, 'ghost',
       make_timestamptz(epoch_us(TIMESTAMPTZ '2026-01-01 00:00:00+00') + {at} + j * 30000000)
FROM range(1, 101) AS r(j);
"""
CONFIG = """
stores:
  src: {source}
  dst: {reader}
state: {{dsn: "{state}"}}
checks:
  tasks:
    source: {{store: src, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: dst, table: tasks, key: task_id, time: completed_at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
    drilldown: {{leaf_rows: 2000}}
"""


def arithmetic(n: int) -> dict[str, int]:
    """Return the generator's numbers for n rows: step, gaps and the cluster's ids."""
    step = DAYS * 86400 * 1_000_000 // n
    extra = max(n // 10000, 1)
    lo = -(-CLUSTER_AT_US // step) + 1  # the first id at or after the cluster's start
    return {
        "n": n,
        "step": step,
        "extra": extra,
        "half_gap": DAYS * 86400 * 1_000_000 // (2 * extra),
        "lo": lo,
        "hi": lo + CLUSTER_IDS - 1,
        "at": CLUSTER_AT_US,
    }


def planted(n: int, shape: str) -> dict[str, int]:
    """Return the missing, extra and mismatched rows planted in a reader of `shape`."""
    if shape == "spread":
        return {
            "missing": len(range(17, n + 1, 1000)),
            "extra": max(n // 10000, 1),
            "mismatched": len(range(503, n + 1, 2000)),
        }
    return {"missing": CLUSTER_IDS // 3, "extra": 100, "mismatched": CLUSTER_IDS // 6}


async def my_database(name: str, statements: list[str]) -> None:
    """Create the MariaDB database `name` (once) by running `statements` in it."""
    import aiomysql

    admin = await aiomysql.connect(host="127.0.0.1", port=53306, user="root", autocommit=True)
    try:
        async with admin.cursor() as cur:
            await cur.execute("SHOW DATABASES LIKE %s", (name,))
            if await cur.fetchone():
                return
            await cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
            await cur.execute(f"USE `{name}`")
            await cur.execute("SET time_zone = '+00:00'")
            for sql in statements:
                for stmt in filter(str.strip, sql.split(";")):
                    await cur.execute(stmt)
            await cur.execute("ANALYZE TABLE tasks")
    finally:
        admin.close()


def duck_file(path: Path, statements: list[str]) -> None:
    """Write a DuckDB database file (once) by running `statements`."""
    import duckdb

    if path.exists():
        return
    conn = duckdb.connect(str(path))
    try:
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()


def prepare(n: int, folder: Path) -> None:
    """Build the sources, the readers of each shape and one config per (pair, shape)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pg_vs_duckdb  # a sibling script, not a package
    import pg_vs_reladiff as pr

    folder.mkdir(parents=True, exist_ok=True)
    a = arithmetic(n)
    pg_src = pr.dsn(asyncio.run(pg_vs_duckdb.source(n)))
    asyncio.run(my_database(f"dg_bench_my_src_{n}", [MY_GEN.format(**a)]))
    drift = {"spread": (MY_SPREAD, DUCK_SPREAD), "cluster": (MY_CLUSTER, DUCK_CLUSTER)}
    my_store = '{{kind: mariadb, dsn: "{}", timeout_seconds: 600}}'
    pg_store = f'{{kind: postgres, dsn: "{pg_src}", timeout_seconds: 600}}'
    for shape, (my_sql, duck_sql) in drift.items():
        my_db = f"dg_bench_my_{shape}_{n}"
        asyncio.run(my_database(my_db, [MY_GEN.format(**a), my_sql.format(**a)]))
        duck = folder / f"tasks_{shape}_{n}.duckdb"
        duck_file(duck, [DUCK_GEN.format(**a), duck_sql.format(**a)])
        readers = {
            "pg-mariadb": (pg_store, my_store.format(f"{MY}/{my_db}")),
            "mariadb-mariadb": (
                my_store.format(f"{MY}/dg_bench_my_src_{n}"),
                my_store.format(f"{MY}/{my_db}"),
            ),
            "pg-duckdb": (pg_store, f"{{kind: duckdb, database: '{duck}', timeout_seconds: 600}}"),
        }
        for pair, (source, reader) in readers.items():
            text = CONFIG.format(source=source, reader=reader, state=pg_src)
            (folder / f"{pair}-{shape}.yml").write_text(text, encoding="utf-8")
            urls = {
                "pg-mariadb": (pg_src, f"{MY}/{my_db}"),
                "mariadb-mariadb": (f"{MY}/dg_bench_my_src_{n}", f"{MY}/{my_db}"),
                "pg-duckdb": (pg_src, f"duckdb://{duck}"),
            }[pair]
            (folder / f"{pair}-{shape}.urls").write_text(" ".join(urls), encoding="utf-8")
    print(json.dumps({"rows": n, "dir": str(folder), **a}))


RELADIFF_COLUMNS = ("label", "completed_at")


def reladiff_counts(source: str, reader: str) -> dict[str, int]:
    """Return reladiff's hashdiff counts of two tasks tables (missing, extra, mismatched)."""
    import reladiff

    a = reladiff.connect_to_table(source, "tasks", "task_id")
    b = reladiff.connect_to_table(reader, "tasks", "task_id")
    minus, plus = set(), set()
    for sign, row in reladiff.diff_tables(
        a, b, extra_columns=RELADIFF_COLUMNS, algorithm=reladiff.Algorithm.HASHDIFF
    ):
        (minus if sign == "-" else plus).add(row[0])
    return {
        "missing": len(minus - plus),
        "extra": len(plus - minus),
        "mismatched": len(minus & plus),
    }


def found(text: str) -> list[dict[str, int]]:
    """Return the counts of every run kept in `text`: driftgauge's JSON or reladiff's line."""
    out: list[dict[str, int]] = []
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^\{", text, re.M):
        try:
            doc: Any = decoder.raw_decode(text, m.start())[0]
        except json.JSONDecodeError:
            continue
        if "buckets" in doc:
            out.append(
                {k: sum(b[k] for b in doc["buckets"]) for k in ("missing", "extra", "mismatched")}
            )
        elif {"missing", "extra", "mismatched"} <= doc.keys():
            out.append({k: doc[k] for k in ("missing", "extra", "mismatched")})
    return out


def main() -> None:
    """Run one subcommand (see the module's docstring)."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dir", type=Path, default=Path("/tmp/dg_bench_mariadb"))
    r = sub.add_parser("reladiff")
    r.add_argument("source")
    r.add_argument("reader")
    c = sub.add_parser("counts")
    c.add_argument("--rows", type=int, default=1_000_000)
    c.add_argument("--shape", choices=SHAPES, required=True)
    c.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare(args.rows, args.dir)
    elif args.cmd == "reladiff":
        print(json.dumps(reladiff_counts(args.source, args.reader)))
    else:
        want = planted(args.rows, args.shape)
        for f in args.files:
            runs = found(f.read_text(encoding="utf-8"))
            exact = sum(run == want for run in runs)
            print(json.dumps({"file": str(f), "runs": len(runs), "exact": exact, "want": want}))


if __name__ == "__main__":
    main()
