"""The one DuckDB boundary: a connection per store, each query on its own cursor in a thread.

DuckDB's API blocks, so nothing here runs it on the event loop. A query that outlives the
store timeout is interrupted (the engine stops it) and reported as a timeout; the same
happens when the awaiting task is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from driftgauge.core.errors import (
    ConfigError,
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.stores.driver_errors import of_types, raising_translator
from driftgauge.stores.duckdb.settings import DuckDBStore
from driftgauge.stores.threads import close_pool as close_pool  # the kind's (registry.StoreKind)
from driftgauge.stores.threads import in_thread, store_threads

T = TypeVar("T")
DRIVER_ERRORS = (duckdb.Error, OSError)
"""What a DuckDB call may raise that is the engine's or the files' doing."""


class Connection:
    """A store's DuckDB connection and the threads its queries run in.

    A database file is opened per query, read-only, and closed after it: DuckDB lets one
    process write a file only while no other process has it open, so a connection held
    between runs would lock out the pipeline that writes it. A store of files only shares
    one in-memory engine (the files themselves are re-read by every query).
    """

    def __init__(self, store: DuckDBStore, conn: duckdb.DuckDBPyConnection | None) -> None:
        self.store = store
        self._conn = conn
        self._pool = store_threads("duckdb", store.name)

    async def cursor(self) -> duckdb.DuckDBPyConnection:
        """Return a new cursor: its own connection to the engine, or to the database file."""
        return await self.call(None, self._new_cursor)

    def _new_cursor(self) -> duckdb.DuckDBPyConnection:
        if self._conn is not None:
            return self._conn.cursor()
        return _connect(self.store)

    async def call(self, cursor: duckdb.DuckDBPyConnection | None, work: Callable[[], T]) -> T:
        """Run `work` (which uses `cursor`) in a thread; interrupt it past the timeout."""
        stop = None if cursor is None else cursor.interrupt
        return await in_thread(self._pool, work, self.store.timeout, stop)

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Return every row of a query as column → value mappings."""
        cursor = await self.cursor()

        def run() -> list[dict[str, Any]]:
            cursor.execute(sql, list(params))
            names = [d[0] for d in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

        try:
            return await self.call(cursor, run)
        finally:
            cursor.close()

    async def close(self) -> None:
        """Close the connection and let the threads finish."""
        if self._conn is not None:
            self._conn.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _connect(store: DuckDBStore) -> duckdb.DuckDBPyConnection:
    config: dict[str, Any] = {"threads": store.threads, "autoinstall_known_extensions": False}
    conn = duckdb.connect(
        store.database or ":memory:", read_only=store.database is not None, config=config
    )
    try:
        # A TIMESTAMP without zone is read as UTC (the default is the process's zone), and
        # cursors inherit it. The ICU extension this needs is built into the wheel.
        conn.execute("SET GLOBAL TimeZone = 'UTC'")
    except BaseException:
        conn.close()
        raise
    return conn


def _open(store: DuckDBStore) -> duckdb.DuckDBPyConnection | None:
    """Check the store's database and file tables; return the engine files-only stores share."""
    problems: list[str] = []
    where = f"stores.{store.name}"
    if store.database is not None and not Path(store.database).is_file():
        raise ConfigError([f"{where}.database: no such file {store.database}"])
    conn = _connect(store)
    try:
        for table in store.files:
            found = conn.execute("SELECT count(*) FROM glob(?)", [table.path]).fetchone()
            if not found or not found[0]:
                problems.append(f"{where}.{table.field}: no file matches {table.path!r}")
                continue
            try:
                conn.execute(f"DESCRIBE SELECT * FROM {table.reader()}").fetchall()
            except duckdb.Error as exc:
                problems.append(
                    f"{where}.{table.field}: cannot read {table.path!r} as "
                    f"{table.format} ({_message(exc)})"
                )
    except BaseException:
        conn.close()
        raise
    if problems or store.database is not None:
        conn.close()  # a database file is opened per query (see Connection)
    if problems:
        raise ConfigError(problems)
    return None if store.database is not None else conn


async def store_pool(store: DuckDBStore) -> Connection:
    """Open the store's database and check its file tables (ConfigError naming the field)."""
    try:
        conn = await asyncio.wait_for(asyncio.to_thread(_open, store), store.timeout)
    except ConfigError:
        raise
    except DRIVER_ERRORS as exc:
        raise store_error(store.name, "open the database", exc) from exc
    return Connection(store, conn)


driver_error = of_types(DRIVER_ERRORS)  # TimeoutError is an OSError


def store_error(store: str, what: str, exc: BaseException) -> StoreError:
    """Return our exception for a DuckDB, file or timeout error."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, TimeoutError | duckdb.InterruptException):
        return StoreTimeout(store, f"{what}: no answer within the timeout")
    if isinstance(exc, PermissionError | duckdb.PermissionException):
        return StorePermissionError(store, f"{what}: {_message(exc)}")
    if isinstance(exc, duckdb.IOException | OSError):
        return StoreUnavailable(store, f"{what}: cannot read the files ({_message(exc)})")
    return StoreQueryError(store, f"{what}: {type(exc).__name__}: {_message(exc)}")


translate_error = raising_translator(driver_error, store_error)


def _message(exc: BaseException) -> str:
    # DuckDB messages carry the SQL's LINE/caret block after a blank line: keep the first part.
    return (str(exc) or type(exc).__name__).split("\n\n", 1)[0].strip()
