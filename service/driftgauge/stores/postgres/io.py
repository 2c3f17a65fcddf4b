"""The PostgreSQL I/O boundary: pools, calls under a deadline, driver errors mapped to ours."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
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

DRIVER_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
"""What a PostgreSQL call may raise that is the database's doing; anything else is a bug."""
TIMEOUTS = (TimeoutError, asyncpg.QueryCanceledError)
REFUSED = (
    asyncpg.InsufficientPrivilegeError,
    asyncpg.InvalidAuthorizationSpecificationError,
    asyncpg.InvalidPasswordError,
)
GONE = (
    asyncpg.InvalidCatalogNameError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.ConnectionDoesNotExistError,
    OSError,
)


def driver_error(exc: BaseException) -> bool:
    """Return True when `exc` is the database's doing (mapped), False when it is a bug."""
    return isinstance(exc, DRIVER_ERRORS)


def store_error(store: str, what: str, exc: BaseException) -> StoreError:
    """Return our exception for a driver error (see driver_error) on a data store."""
    if isinstance(exc, TIMEOUTS):
        return StoreTimeout(store, f"{what}: no answer within the timeout")
    if isinstance(exc, REFUSED):
        return StorePermissionError(store, f"{what}: {exc.sqlstate} {_message(exc)}")
    if isinstance(exc, GONE):
        return StoreUnavailable(store, f"{what}: cannot use the connection ({_message(exc)})")
    if isinstance(exc, asyncpg.PostgresError):
        return StoreQueryError(store, f"{what}: {exc.sqlstate} {_message(exc)}")
    # InterfaceError: the driver refused the call (a closed pool, a broken protocol state).
    return StoreQueryError(store, f"{what}: {type(exc).__name__}: {exc}")


def translate_error(store: str, what: str, exc: BaseException) -> StoreError | None:
    """Return our exception for an asyncpg or socket error; None for anything else (a bug)."""
    return store_error(store, what, exc) if driver_error(exc) else None


def state_error(what: str, exc: BaseException, limit: float) -> StateError:
    """Return our exception for a driver error (see driver_error) on the state database."""
    if isinstance(exc, TimeoutError):
        return StateError(f"state database: {what}: no answer within {limit:g}s")
    return StateError(f"state database: {what}: {describe(exc)}")


@contextmanager
def store_errors(store: str, what: str) -> Iterator[None]:
    """Turn driver errors inside the block into our StoreErrors; let anything else through."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise store_error(store, what, exc) from exc


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


async def open_pool(
    state: State,
    *,
    deadline: float = 10.0,
    pool_max: int = 2,
    application: str = "driftgauge-signals",
) -> Any:
    """Open a pool on the state schema (migrations are applied by the StateStore)."""
    try:
        dsn = state.dsn.reveal()
    except SecretError as exc:
        raise StateError(f"state.dsn: {exc.problems[0]}") from None
    settings = {
        "search_path": '"' + state.schema.replace('"', '""') + '"',
        "application_name": application,
    }
    try:
        async with asyncio.timeout(deadline * 2):
            return await asyncpg.create_pool(
                dsn,
                min_size=1,
                max_size=pool_max,
                timeout=deadline,
                command_timeout=deadline,
                server_settings=settings,
            )
    except (*DRIVER_ERRORS, ValueError) as exc:  # ValueError: a DSN the driver cannot parse
        raise StateError(
            f"state.dsn: cannot connect to the state database ({describe(exc)})"
        ) from None


async def store_pool(store: PostgresStore) -> Any:
    """Open the pool of a data store after checking its encoding; failures are StoreErrors."""
    try:
        pool = await asyncio.wait_for(
            asyncpg.create_pool(
                store.dsn.reveal(),
                min_size=1,
                max_size=store.pool_max,
                timeout=store.timeout,
                command_timeout=store.timeout,
                server_settings={
                    # UTC sessions make a timestamp without time zone read as UTC everywhere.
                    "TimeZone": "UTC",
                    "application_name": "driftgauge",
                    # The server's own deadline: a replica killed mid-query leaves nobody
                    # to cancel it, and the source would carry the scan on alone.
                    "statement_timeout": f"{math.ceil(store.timeout * 1000)}ms",
                },
            ),
            timeout=store.timeout,
        )
    except ValueError as exc:  # a DSN the driver cannot parse
        raise StoreQueryError(store.name, f"connect: ValueError: {exc}") from exc
    except DRIVER_ERRORS as exc:
        raise store_error(store.name, "connect", exc) from exc
    try:
        with store_errors(store.name, "check the encoding"):
            async with pooled(pool, store.timeout) as conn:
                encoding = await conn.fetchval("SHOW server_encoding", timeout=store.timeout)
    except BaseException:
        await pool.close()
        raise
    if encoding != "UTF8":
        await pool.close()
        # md5(text) hashes the database encoding's bytes, not UTF-8.
        raise StoreQueryError(
            store.name,
            (
                f"server_encoding is {encoding}; driftgauge needs a UTF8 database "
                "so that md5() sees UTF-8 bytes"
            ),
        )
    return pool


async def close_pool(pool: Any, seconds: float = 10.0) -> None:
    """Close a pool, waiting at most `seconds`."""
    await asyncio.wait_for(pool.close(), timeout=seconds)


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc or type(exc).__name__)
