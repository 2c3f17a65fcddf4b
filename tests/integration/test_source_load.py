"""The load guard on a real PostgreSQL: the server's own statement deadline, one pool per store."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from .conftest import PG_DSN, TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
HANG = """
import asyncio, sys
from driftgauge.config.secrets import Secret
from driftgauge.stores.postgres.io import store_pool
from driftgauge.stores.postgres.settings import PostgresStore

async def main() -> None:
    store = PostgresStore("src", Secret(sys.argv[1]), timeout=float(sys.argv[2]))
    pool = await store_pool(store)
    async with pool.acquire() as conn:
        print("ready", flush=True)
        # The client's own deadline is far away: only the server's can end this.
        await conn.fetchval("SELECT pg_sleep(60) /* driftgauge-hang */", timeout=120)

asyncio.run(main())
"""


async def _hung(admin: asyncpg.Connection) -> int:
    return int(
        await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            " AND query LIKE '%driftgauge-hang */' AND pid <> pg_backend_pid()"
        )
    )


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
async def test_a_query_left_behind_by_a_killed_replica_ends_at_the_store_timeout() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "service")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HANG, PG_DSN, "2", env=env, stdout=asyncio.subprocess.PIPE
    )
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    try:
        assert proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"ready"
        deadline = time.monotonic() + 30
        while await _hung(admin) == 0:
            assert time.monotonic() < deadline, "the sleeping query never started"
            await asyncio.sleep(0.05)
        started = time.monotonic()
        proc.send_signal(signal.SIGKILL)  # nobody is left to cancel it
        await asyncio.wait_for(proc.wait(), 10)
        while await _hung(admin) > 0:
            # Without statement_timeout the backend sleeps its 60 s out.
            assert time.monotonic() - started < 20, "the query outlived the store timeout"
            await asyncio.sleep(0.1)
        assert await admin.fetchval("SELECT 1") == 1
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await admin.close()
