"""Steps of the scale bench that take minutes: loading a data set, running reladiff.

Each prints a progress line while it runs. A data set is built under a temporary name and
renamed when complete, so a database of the final name is always a finished one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg

from pg_vs_reladiff import PG, PY, RELADIFF, WRAP, dsn

CHUNK = 5_000_000
TABLE = (
    "CREATE UNLOGGED TABLE tasks"
    " (task_id bigint NOT NULL, label text, completed_at timestamptz NOT NULL)"
    " WITH (autovacuum_enabled = off)"  # the bench vacuums once; none under a measured run
)
FILL = """
INSERT INTO tasks SELECT i, 'label_' || (i % 7),
       timestamptz '2026-01-01 00:00:00+00' + (i - 1) * interval '{sp} milliseconds'
FROM generate_series({lo}, {hi}) AS i
"""
INDEXES = (
    "CREATE UNIQUE INDEX tasks_pkey ON tasks (task_id)",
    "CREATE INDEX tasks_completed_at_idx ON tasks (completed_at)",
)
INDEX_PROGRESS = """
SELECT coalesce(c.relname, '?') AS name, p.phase, p.blocks_done, p.blocks_total,
       p.tuples_done, p.tuples_total
FROM pg_stat_progress_create_index p LEFT JOIN pg_class c ON c.oid = p.index_relid
WHERE p.datid = (SELECT oid FROM pg_database WHERE datname = $1)
"""
VACUUM_PROGRESS = """
SELECT phase, heap_blks_scanned, heap_blks_total FROM pg_stat_progress_vacuum
WHERE datid = (SELECT oid FROM pg_database WHERE datname = $1)
"""
FULL = 0.85  # never fill the disk past this


def say(msg: str) -> None:
    """Print one progress line."""
    print(f"# {msg}", file=sys.stderr, flush=True)


def since(t0: float) -> str:
    """Return the seconds since t0 and the load average, for a progress line."""
    return f"{time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f}"


@contextmanager
def ticking(label: str, every: float = 60.0) -> Iterator[None]:
    """Print a progress line every `every` seconds until the block ends."""
    done = threading.Event()
    t0 = time.perf_counter()

    def tick() -> None:
        while not done.wait(every):
            say(f"{label}: running, {since(t0)}")

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


async def watched(label: str, step: Awaitable[Any], probe: str | None, db: str) -> Any:
    """Await a long step, printing its progress (a pg_stat_progress_* query) every 30 s."""
    mon = await asyncpg.connect(PG)
    t0 = time.perf_counter()
    task = asyncio.ensure_future(step)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=30)
            if done:
                return task.result()
            rows = await mon.fetch(probe, db) if probe else []
            state = "; ".join(" ".join(str(v) for v in r.values()) for r in rows)
            say(f"{label}: {state or 'running'}, {since(t0)}")
    finally:
        await mon.close()


def room(data_dir: str, need: int) -> None:
    """Refuse a step whose `need` bytes would fill the disk past FULL."""
    du = shutil.disk_usage(data_dir)
    after = (du.used + need) / (du.used + du.free)
    if after > FULL:
        raise SystemExit(
            f"disk would reach {after:.0%} (limit {FULL:.0%}): free space or drop data sets"
        )


async def usable(db: str, top: int) -> bool:
    """Return whether a finished data set still holds its rows (a crash empties unlogged ones)."""
    conn = await asyncpg.connect(dsn(db))
    try:
        return bool(await conn.fetchval("SELECT max(task_id) FROM tasks") == top)
    except asyncpg.UndefinedTableError:
        return False
    finally:
        await conn.close()


async def build_src(admin: asyncpg.Connection, n: int, sp: int, db: str, data_dir: str) -> None:
    """Generate n tasks sp ms apart under a temporary name, then rename it (complete or absent)."""
    tmp = f"{db}_tmp"
    await admin.execute(f'DROP DATABASE IF EXISTS "{tmp}"')
    room(data_dir, n * 110)  # heap ~52 B a row, two indexes ~22 B each, slack
    await admin.execute(f'CREATE DATABASE "{tmp}"')
    t0 = time.perf_counter()
    conns = [await asyncpg.connect(dsn(tmp)) for _ in range(2)]
    try:
        await conns[0].execute(TABLE)
        chunks = [(lo, min(lo + CHUNK - 1, n)) for lo in range(1, n + 1, CHUNK)]
        filled = 0

        async def fill(conn: asyncpg.Connection) -> None:
            nonlocal filled
            while chunks:
                lo, hi = chunks.pop(0)
                await conn.execute(FILL.format(sp=sp, lo=lo, hi=hi))
                filled += hi - lo + 1
                say(f"{db}: {filled:,}/{n:,} rows, {since(t0)}")

        await asyncio.gather(*(fill(c) for c in conns))
        for c in conns:
            await c.execute("SET maintenance_work_mem = '1GB'")
            await c.execute("SET max_parallel_maintenance_workers = 0")
        # Both indexes at once, one a connection: each is one sort, the machine has 2 cores.
        await watched(
            f"{db}: indexing",
            asyncio.gather(*(c.execute(sql) for c, sql in zip(conns, INDEXES, strict=True))),
            INDEX_PROGRESS,
            tmp,
        )
        await conns[0].execute(
            "ALTER TABLE tasks ADD CONSTRAINT tasks_pkey PRIMARY KEY USING INDEX tasks_pkey"
        )
        # Frozen and all-visible once, so no autovacuum rewrites it under a measured run.
        await watched(
            f"{db}: vacuum",
            conns[0].execute("VACUUM (FREEZE, ANALYZE) tasks"),
            VACUUM_PROGRESS,
            tmp,
        )
    finally:
        for c in conns:
            await c.close()
    await admin.execute(f'ALTER DATABASE "{tmp}" RENAME TO "{db}"')
    say(f"{db}: ready, {since(t0)}")


async def build_dst(
    admin: asyncpg.Connection, src: str, db: str, plant: list[tuple[str, int]], data_dir: str
) -> None:
    """Copy the source under a temporary name, run the planting statements, then rename it.

    Each statement comes with the row count it must touch, or the bench stops.
    """
    tmp = f"{db}_tmp"
    await admin.execute(f'DROP DATABASE IF EXISTS "{tmp}"')
    room(data_dir, int(await admin.fetchval("SELECT pg_database_size($1)", src)))
    t0 = time.perf_counter()
    # A file copy of the source: far cheaper than generating N rows again, and unlike
    # the WAL_LOG strategy it does not push every page through the shared buffers.
    await watched(
        f"{db}: copying",
        admin.execute(f'CREATE DATABASE "{tmp}" TEMPLATE "{src}" STRATEGY = FILE_COPY'),
        None,
        tmp,
    )
    if plant:
        conn = await asyncpg.connect(dsn(tmp))
        try:
            for sql, rows in plant:
                tag = await conn.execute(sql)
                if int(tag.split()[-1]) != rows:
                    raise SystemExit(f"{db}: {sql!r} touched {tag}, planted {rows}")
            await conn.execute("VACUUM ANALYZE tasks")
        finally:
            await conn.close()
    await admin.execute(f'ALTER DATABASE "{tmp}" RENAME TO "{db}"')
    say(f"{db}: ready, {since(t0)}")


def reladiff_timed(
    src: str, dst: str, limit: float, script: str = RELADIFF, args: list[str] | None = None
) -> dict[str, Any]:
    """Run reladiff's hashdiff on one pair; stop it after `limit` seconds (a lower bound).

    `src` and `dst` are PostgreSQL databases unless `script` and its `args` say otherwise.
    """
    load = os.getloadavg()[0]
    if limit <= 0:
        return {"skipped": "past the deadline", "load": round(load, 1)}
    argv = [PY, "-c", WRAP, PY, "-c", script, *(args or [dsn(src), dsn(dst)])]
    t0 = time.perf_counter()
    # Its own process group, so a stop takes the wrapped reladiff process with it.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        with ticking(f"reladiff {dst}"):
            out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        asyncio.run(stop_backends([src, dst]))
        return {"unfinished_after_s": round(time.perf_counter() - t0, 1), "load": round(load, 1)}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"reladiff failed ({proc.returncode}): {err[-2000:]}")
    rss_kb = next(int(x.split()[1]) for x in err.splitlines() if x.startswith("maxrss_kb"))
    got = json.loads(out.strip().splitlines()[-1])
    return {
        "wall_s": round(wall, 2),
        "load": round(load, 1),
        "rss_mb": round(rss_kb / 1024, 1),
        "found": {k: got[k] for k in ("missing", "extra", "mismatched")},
    }


async def stop_backends(dbs: list[str]) -> None:
    """End the server sessions a stopped reladiff left running on the bench's databases."""
    admin = await asyncpg.connect(PG)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = ANY($1::text[]) AND pid <> pg_backend_pid()",
            dbs,
        )
    finally:
        await admin.close()
