"""The MariaDB I/O boundary: the aiomysql pool, calls under a deadline, errors mapped to ours."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

import aiomysql
import pymysql

from driftgauge.core import errors
from driftgauge.stores.mariadb.settings import MariaDBStore, dsn_shape

PERMISSION_ERRORS = frozenset({1044, 1045, 1142, 1143, 1227, 1370})
"""Access denied to a database, a user, a table, a column, an operation or a routine."""
TIMEOUT_ERRORS = frozenset({1317, 1969, 3024})
"""Query interrupted, max_statement_time exceeded (MariaDB), execution time exceeded (MySQL)."""
UNAVAILABLE_ERRORS = frozenset({1040, 1053, 1203, 2002, 2003, 2006, 2013, 2055})
"""Too many connections, shutdown in progress, can't connect, server gone, lost connection."""
DRIVER_ERRORS = (pymysql.MySQLError, OSError, TimeoutError)
"""What the store or the way to it can raise; anything else is a bug and propagates."""


def connect_args(dsn: str) -> dict[str, Any]:
    """Return aiomysql's connect arguments for a mysql:// URL."""
    problem = dsn_shape(dsn)
    if problem:
        raise ValueError(problem)
    parts = urlsplit(dsn.strip())
    return {
        "host": parts.hostname,
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "db": unquote(parts.path.strip("/")),
    }


def session_setup(timeout: float) -> str:
    """Return the statement every connection runs first."""
    # UTC sessions read DATETIME and TIMESTAMP as UTC. On MariaDB (the /*M! comment runs
    # there only) the server stops a statement that outlives the store timeout, so a
    # cancelled call leaves no query running behind it. Its subquery cache is off: it keys
    # a correlated subquery's answer by the outer value under that value's collation, so
    # the prefix filter (EXISTS over JSON_TABLE) answered for key 'c-1' was reused for 'C-1'.
    return (
        f"SET time_zone = '+00:00' /*M!100100 , max_statement_time = {max(timeout, 0.001):.3f}"
        ", optimizer_switch = 'subquery_cache=off' */"
    )


async def store_pool(store: MariaDBStore) -> Any:
    """Open the pool of a store and check the session; failures are StoreErrors."""
    try:
        args = connect_args(store.dsn.reveal())
    except (errors.SecretError, ValueError) as exc:
        raise errors.StoreQueryError(store.name, f"dsn: {exc}") from None
    try:
        async with asyncio.timeout(store.timeout):
            pool = await aiomysql.create_pool(
                minsize=1,
                maxsize=store.pool_max,
                charset="utf8mb4",
                autocommit=True,
                connect_timeout=store.timeout,
                init_command=session_setup(store.timeout),
                pool_recycle=3600,
                **args,
            )
    except DRIVER_ERRORS as exc:
        raise translate_error(store.name, "connect", exc) from exc
    return pool


async def close_pool(pool: Any, seconds: float = 10.0) -> None:
    """Close a pool, waiting at most `seconds`."""
    pool.close()
    await asyncio.wait_for(pool.wait_closed(), timeout=seconds)


@asynccontextmanager
async def connection(pool: Any, store: str, what: str, wait: float) -> AsyncIterator[Any]:
    """Yield a pooled connection; one whose call failed other than by a SQL error is closed.

    Waits at most `wait` seconds for a connection; driver, socket and timeout errors are
    raised as StoreErrors naming `what`, anything else (a bug) as itself.
    """
    try:
        async with asyncio.timeout(wait):
            conn = await pool.acquire()
    except DRIVER_ERRORS as exc:
        raise translate_error(store, what, exc) from exc
    try:
        yield conn
    except BaseException as exc:
        if not _is_sql_error(exc):
            # A cancelled or timed-out call leaves unread bytes on the wire: never reuse it.
            conn.close()
        if isinstance(exc, DRIVER_ERRORS):
            raise translate_error(store, what, exc) from exc
        raise
    finally:
        await pool.release(conn)


def _is_sql_error(exc: BaseException) -> bool:
    code = _code(exc)
    return (
        isinstance(exc, pymysql.MySQLError)
        and code is not None
        and code < 2000
        and code not in UNAVAILABLE_ERRORS | TIMEOUT_ERRORS
    )


def _code(exc: BaseException) -> int | None:
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    return args[0] if args and isinstance(args[0], int) else None


def translate_error(store: str, what: str, exc: BaseException) -> errors.StoreError:
    """Return our exception for an aiomysql/PyMySQL or socket error."""
    if isinstance(exc, errors.StoreError):
        return exc
    if isinstance(exc, TimeoutError):
        return errors.StoreTimeout(store, f"{what}: no answer within the timeout")
    code = _code(exc)
    message = _message(exc)
    if code in TIMEOUT_ERRORS:
        return errors.StoreTimeout(
            store, f"{what}: no answer within the timeout ({code} {message})"
        )
    if code in PERMISSION_ERRORS:
        return errors.StorePermissionError(store, f"{what}: {code} {message}")
    if code in UNAVAILABLE_ERRORS or isinstance(exc, OSError | pymysql.err.InterfaceError):
        return errors.StoreUnavailable(store, f"{what}: cannot use the connection ({message})")
    # Any other driver error: the server refused the statement, or the driver the call.
    return errors.StoreQueryError(
        store, f"{what}: {code} {message}" if code else f"{what}: {message}"
    )


def _message(exc: BaseException) -> str:
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    if len(args) >= 2 and isinstance(args[1], str):
        return " ".join(args[1].split())
    return " ".join(str(exc).split()) or type(exc).__name__
