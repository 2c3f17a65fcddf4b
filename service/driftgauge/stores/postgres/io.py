"""State-database calls under a deadline, with driver errors translated into StateError."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from driftgauge.config.runtime import State
from driftgauge.core.errors import SecretError, StateError

DB_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def describe(exc: BaseException) -> str:
    """Return an exception's type and message on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
        except TimeoutError:
            raise StateError(f"state database: {what}: no answer within {limit:g}s") from None
        except DB_ERRORS as exc:
            raise StateError(f"state database: {what}: {describe(exc)}") from None

    @asynccontextmanager
    async def transaction(self, what: str, *, scale: float = 1.0) -> AsyncIterator[Any]:
        """Yield a connection inside a transaction that rolls back if the block fails."""
        async with self.conn(what, scale=scale) as conn, conn.transaction():
            yield conn


async def open_pool(state: State, *, deadline: float = 10.0, pool_max: int = 2) -> Any:
    """Open a small pool on the state schema (migrations are applied by the StateStore)."""
    try:
        dsn = state.dsn.reveal()
    except SecretError as exc:
        raise StateError(f"state.dsn: {exc.problems[0]}") from None
    settings = {"search_path": '"' + state.schema.replace('"', '""') + '"',
                "application_name": "driftgauge-signals"}
    try:
        async with asyncio.timeout(deadline * 2):
            return await asyncpg.create_pool(dsn, min_size=1, max_size=pool_max,
                                             timeout=deadline, command_timeout=deadline,
                                             server_settings=settings)
    except (*DB_ERRORS, ValueError) as exc:
        raise StateError(f"state.dsn: cannot connect to the state database "
                         f"({describe(exc)})") from None
