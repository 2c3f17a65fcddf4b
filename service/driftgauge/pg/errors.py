"""PostgreSQL driver errors mapped to ours, for the state database and for data stores."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from driftgauge.core.errors import (
    StateError,
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)

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


def describe(exc: BaseException) -> str:
    """Return an exception's type and message on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc or type(exc).__name__)
