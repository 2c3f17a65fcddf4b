"""The PostgreSQL I/O boundary: pools, calls under a deadline, driver errors mapped to ours."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from driftgauge.config.runtime import State
from driftgauge.core.errors import (
    SecretError,
    StateError,
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.stores.postgres.settings import PostgresStore

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


async def store_pool(store: PostgresStore) -> Any:
    """Open the pool of a data store after checking its encoding; failures are StoreErrors."""
    try:
        pool = await asyncio.wait_for(asyncpg.create_pool(
            store.dsn.reveal(), min_size=1, max_size=store.pool_max,
            timeout=store.timeout, command_timeout=store.timeout,
            # UTC sessions make a timestamp without time zone read as UTC everywhere.
            server_settings={"TimeZone": "UTC", "application_name": "driftgauge"},
        ), timeout=store.timeout)
    except Exception as exc:
        raise translate_error(store.name, "connect", exc) from exc
    try:
        async with pool.acquire(timeout=store.timeout) as conn:
            encoding = await conn.fetchval("SHOW server_encoding", timeout=store.timeout)
    except BaseException as exc:
        await pool.close()
        if isinstance(exc, Exception):
            raise translate_error(store.name, "check the encoding", exc) from exc
        raise
    if encoding != "UTF8":
        await pool.close()
        # md5(text) hashes the database encoding's bytes, not UTF-8.
        raise StoreQueryError(store.name, (
            f"server_encoding is {encoding}; driftgauge needs a UTF8 database "
            "so that md5() sees UTF-8 bytes"))
    return pool


async def close_pool(pool: Any, seconds: float = 10.0) -> None:
    """Close a pool, waiting at most `seconds`."""
    await asyncio.wait_for(pool.close(), timeout=seconds)


def translate_error(store: str, what: str, exc: BaseException) -> StoreError:
    """Return our exception for an asyncpg or socket error."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, TimeoutError | asyncpg.QueryCanceledError):
        return StoreTimeout(store, f"{what}: no answer within the timeout")
    if isinstance(exc, asyncpg.InsufficientPrivilegeError
                  | asyncpg.InvalidAuthorizationSpecificationError
                  | asyncpg.InvalidPasswordError):
        return StorePermissionError(store, f"{what}: {exc.sqlstate} {_message(exc)}")
    if isinstance(exc, asyncpg.InvalidCatalogNameError | asyncpg.CannotConnectNowError
                  | asyncpg.TooManyConnectionsError | asyncpg.ConnectionDoesNotExistError
                  | OSError):
        return StoreUnavailable(store, f"{what}: cannot use the connection ({_message(exc)})")
    if isinstance(exc, asyncpg.PostgresError):
        return StoreQueryError(store, f"{what}: {exc.sqlstate} {_message(exc)}")
    return StoreQueryError(store, f"{what}: {type(exc).__name__}: {exc}")


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc or type(exc).__name__)
