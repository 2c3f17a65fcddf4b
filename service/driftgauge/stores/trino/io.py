"""The Trino boundary: DB-API connections per call, each call in a thread.

The client blocks, so nothing here runs it on the event loop. A call that outlives the
store timeout (or whose task is cancelled) has its query cancelled and is a timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import requests
from trino import dbapi
from trino.auth import BasicAuthentication, JWTAuthentication
from trino.exceptions import Error as TrinoError
from trino.exceptions import HttpError, TrinoAuthError, TrinoConnectionError

from driftgauge.core.errors import SecretError, StoreError, StoreQueryError
from driftgauge.stores.driver_errors import of_types, raising_translator, server_error
from driftgauge.stores.threads import close_pool as close_pool  # the kind's (registry.StoreKind)
from driftgauge.stores.threads import in_thread, store_threads
from driftgauge.stores.trino.settings import TrinoStore

T = TypeVar("T")
DRIVER_ERRORS = (TrinoError, HttpError, requests.RequestException, OSError)
"""What a Trino call may raise that is the server's or the network's doing."""
PERMISSION = ("PERMISSION_DENIED", "Access Denied", "Unauthorized", "401", "403")


class TrinoSession:
    """A store's connection settings and the threads its calls run in."""

    def __init__(self, store: TrinoStore) -> None:
        self.store = store
        self._pool = store_threads("trino", store.name)

    def connect(self) -> Any:
        """Return a new DB-API connection (sessions run in UTC)."""
        store = self.store
        parts = store.url.split("://", 1)
        host, port = parts[1].rstrip("/").rsplit(":", 1)
        auth: Any = None
        if store.password is not None:
            auth = BasicAuthentication(store.user, store.password.reveal())
        elif store.token is not None:
            auth = JWTAuthentication(store.token.reveal())
        kwargs: dict[str, Any] = {} if auth is None else {"auth": auth}
        return dbapi.connect(  # type: ignore[no-untyped-call]
            host=host,
            port=int(port),
            http_scheme=parts[0],
            user=store.user,
            catalog=store.catalog,
            schema=store.schema,
            verify=store.verify,
            timezone="UTC",
            request_timeout=store.timeout,
            **kwargs,
        )

    async def call(self, work: Callable[[Any], T]) -> T:
        """Run `work(cursor)` on a connection of its own in a thread; cancel it past the timeout."""
        conn = self.connect()
        cursor = conn.cursor()
        try:
            return await self._in_thread(cursor, lambda: work(cursor))
        finally:
            conn.close()

    async def fetch(self, sql: str) -> list[dict[str, Any]]:
        """Return every row of a query as column → value mappings."""

        def work(cursor: Any) -> list[dict[str, Any]]:
            cursor.execute(sql)
            rows = cursor.fetchall()
            # A statement (CREATE, CALL) has no description: it returns no rows.
            names = [d[0] for d in cursor.description or ()]
            return [dict(zip(names, r, strict=True)) for r in rows]

        return await self.call(work)

    async def execute(self, sql: str) -> None:
        """Run a statement to its end."""
        await self.call(lambda c: (c.execute(sql), c.fetchall()))

    async def schema(self, sql: str) -> list[tuple[str, str]]:
        """Return (column, Trino type) of a query's result, no rows read."""
        return await self.call(_described(sql))

    async def stream(self, sql: str) -> Stream:
        """Return a running query whose rows are read in batches (see Stream)."""
        conn = self.connect()
        cursor = conn.cursor()
        try:
            await self._in_thread(cursor, lambda: cursor.execute(sql))
        except BaseException:
            conn.close()
            raise
        return Stream(self, conn, cursor)

    async def _in_thread(self, cursor: Any, work: Callable[[], T]) -> T:
        """Run `work` in a thread; past the timeout (or cancelled), cancel the cursor's query."""
        return await in_thread(self._pool, work, self.store.timeout, lambda: _cancel(cursor))

    async def close(self) -> None:
        """Let the threads finish."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class Stream:
    """A running query's rows, read `size` at a time in the session's threads."""

    def __init__(self, session: TrinoSession, conn: Any, cursor: Any) -> None:
        self.session = session
        self.conn = conn
        self.cursor = cursor

    async def batch(self, size: int) -> list[tuple[Any, ...]]:
        """Return the next `size` rows (fewer at the end); a timeout cancels the query."""
        return await self.session._in_thread(
            self.cursor, lambda: [tuple(r) for r in self.cursor.fetchmany(size)]
        )

    def close(self) -> None:
        """End the query (cancelled if rows are left) and close its connection."""
        _cancel(self.cursor)
        self.conn.close()


def _described(sql: str) -> Callable[[Any], list[tuple[str, str]]]:
    def work(cursor: Any) -> list[tuple[str, str]]:
        cursor.execute(f"SELECT * FROM ({sql}) AS d LIMIT 0")
        cursor.fetchall()
        return [(d[0], str(d[1])) for d in cursor.description]

    return work


def _cancel(cursor: Any) -> None:
    # The server is gone or the query ended: nothing left to stop.
    with contextlib.suppress(*DRIVER_ERRORS):
        cursor.cancel()


async def store_pool(store: TrinoStore) -> TrinoSession:
    """Return the store's session after checking the server answers; failures are StoreErrors."""
    session = TrinoSession(store)
    try:
        await session.fetch("SELECT 1")
    except SecretError as exc:
        raise StoreQueryError(store.name, f"credentials: {exc}") from None
    except (*DRIVER_ERRORS, TimeoutError) as exc:
        await session.close()
        raise store_error(store.name, f"connect to {store.url}", exc) from exc
    return session


driver_error = of_types(DRIVER_ERRORS)


def store_error(store: str, what: str, exc: BaseException) -> StoreError:
    """Return our exception for a Trino, network or timeout error."""
    message = _message(exc)
    return server_error(
        store,
        what,
        exc,
        message,
        cancelled="USER_CANCELED" in message,
        denied=isinstance(exc, TrinoAuthError) or any(word in message for word in PERMISSION),
        unreachable=isinstance(
            exc, OSError | requests.ConnectionError | TrinoConnectionError | HttpError
        ),
    )


translate_error = raising_translator(driver_error, store_error)


def _message(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:500]
