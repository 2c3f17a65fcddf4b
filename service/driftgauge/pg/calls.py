"""Connections under a deadline: pooled, dedicated sessions, and the state database's calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from driftgauge.pg.errors import DRIVER_ERRORS, state_error


@asynccontextmanager
async def pooled(pool: Any, seconds: float) -> AsyncIterator[Any]:
    """Yield a pooled connection; drop it if it failed other than by a SQL error."""
    conn = await pool.acquire(timeout=seconds)
    try:
        yield conn
    except BaseException as exc:
        if not isinstance(exc, asyncpg.PostgresError):
            # A graceful release of a timed-out connection waits for its cancel, as
            # long again on a hung server: the store timeout would double.
            conn.terminate()
        raise
    finally:
        await pool.release(conn)


async def session(dsn: str, seconds: float, application: str) -> Any:
    """Return a dedicated connection (not pooled), for a session-level lock."""
    return await asyncpg.connect(
        dsn, timeout=seconds, server_settings={"application_name": application}
    )


async def close_session(conn: Any, deadline: float) -> None:
    """Close a dedicated connection, or drop it if the server does not answer."""
    try:
        await asyncio.wait_for(conn.close(), deadline)
    except (TimeoutError, OSError, asyncpg.InterfaceError):
        conn.terminate()


class PgCalls:
    """Hand out pooled connections under a deadline; every failure becomes a StateError."""

    def __init__(self, pool: Any, timeout: float = 10.0) -> None:
        self.pool = pool
        self.timeout = timeout

    @asynccontextmanager
    async def conn(self, what: str, *, scale: float = 1.0) -> AsyncIterator[Any]:
        """Yield a connection for one call named `what`; raise StateError if it fails."""
        limit = self.timeout * scale
        try:
            async with asyncio.timeout(limit), self.pool.acquire() as conn:
                yield conn
        except DRIVER_ERRORS as exc:
            raise state_error(what, exc, limit) from None

    @asynccontextmanager
    async def transaction(self, what: str, *, scale: float = 1.0) -> AsyncIterator[Any]:
        """Yield a connection inside a transaction that rolls back if the block fails."""
        async with self.conn(what, scale=scale) as conn, conn.transaction():
            yield conn

    async def fetch(self, what: str, query: str, *args: Any, scale: float = 1.0) -> list[Any]:
        """Run one query named `what` on a connection of its own; return its records."""
        async with self.conn(what, scale=scale) as conn:
            return list(await conn.fetch(query, *args))

    async def fetch_each(self, what: str, queries: Sequence[str], *args: Any) -> list[list[Any]]:
        """Run each query with the same parameters on one connection; return their records."""
        async with self.conn(what) as conn:
            return [list(await conn.fetch(query, *args)) for query in queries]

    async def fetchrow(self, what: str, query: str, *args: Any, scale: float = 1.0) -> Any:
        """Run one query named `what`; return its first record, or None."""
        async with self.conn(what, scale=scale) as conn:
            return await conn.fetchrow(query, *args)

    async def fetchval(self, what: str, query: str, *args: Any, scale: float = 1.0) -> Any:
        """Run one query named `what`; return the first column of its first record, or None."""
        async with self.conn(what, scale=scale) as conn:
            return await conn.fetchval(query, *args)

    async def execute(self, what: str, query: str, *args: Any, scale: float = 1.0) -> str:
        """Run one statement named `what`; return its status (`UPDATE 3`)."""
        async with self.conn(what, scale=scale) as conn:
            done: str = await conn.execute(query, *args)
        return done
