"""The Spark Connect boundary: one client session per store, each call in a thread.

The client blocks, so nothing here runs it on the event loop. Every call carries a tag of
its own; a call that outlives the store timeout (or whose task is cancelled) has its
Spark jobs interrupted by that tag and is reported as a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from driftgauge.core.errors import SecretError, StoreError, StoreQueryError
from driftgauge.stores.driver_errors import of_types, raising_translator, server_error
from driftgauge.stores.spark.settings import SparkStore
from driftgauge.stores.threads import close_pool as close_pool  # the kind's (registry.StoreKind)
from driftgauge.stores.threads import in_thread, store_threads

with warnings.catch_warnings():
    # The client warns at import about pandas releases it has not been tested with.
    warnings.simplefilter("ignore", FutureWarning)
    from pyspark.errors import PySparkException
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession

T = TypeVar("T")
DRIVER_ERRORS = (PySparkException, OSError)
"""What a Spark Connect call may raise that is the server's or the network's doing."""
UNAVAILABLE = ("UNAVAILABLE", "failed to connect", "Connection refused", "RETRIES_EXCEEDED")
PERMISSION = ("PERMISSION_DENIED", "UNAUTHENTICATED", "INSUFFICIENT_PERMISSIONS")


class ConnectSession:
    """A store's Spark Connect session and the threads its calls run in."""

    def __init__(self, store: SparkStore, spark: SparkSession) -> None:
        self.store = store
        self.spark = spark
        self._pool = store_threads("spark", store.name)

    async def call(self, work: Callable[[], T]) -> T:
        """Run `work` in a thread under a tag of its own; interrupt its jobs past the timeout."""
        tag = f"driftgauge-{uuid.uuid4().hex}"

        def tagged() -> T:
            # Tags are the calling thread's: add it in the thread that sends the request.
            self.spark.addTag(tag)
            try:
                return work()
            finally:
                self.spark.removeTag(tag)

        return await in_thread(self._pool, tagged, self.store.timeout, lambda: self._interrupt(tag))

    def _interrupt(self, tag: str) -> None:
        # The server is gone or the job ended: nothing left to stop.
        with contextlib.suppress(*DRIVER_ERRORS):
            self.spark.interruptTag(tag)

    async def fetch(self, sql: str, args: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Return every row of a query as column → value mappings."""
        return await self.call(lambda: [r.asDict() for r in self._frame(sql, args).collect()])

    async def schema(self, sql: str) -> list[tuple[str, str]]:
        """Return (column, Spark SQL type) of a query's result, no rows read."""
        return await self.call(
            lambda: [(f.name, f.dataType.simpleString()) for f in self._frame(sql).schema.fields]
        )

    def rows(self, sql: str, args: Mapping[str, Any] | None = None) -> Iterator[tuple[Any, ...]]:
        """Return an iterator over a query's rows, streamed as the server sends them."""
        return (tuple(r) for r in self._frame(sql, args).toLocalIterator())

    async def batch(self, rows: Iterator[tuple[Any, ...]], size: int) -> list[tuple[Any, ...]]:
        """Return the next `size` rows of an iterator from `rows` (fewer at its end)."""
        return await self.call(lambda: list(itertools.islice(rows, size)))

    async def refresh(self, table: str) -> None:
        """Forget the file listing Spark cached for `table`, so a rewrite is seen."""
        await self.call(lambda: self.spark.sql(f"REFRESH TABLE {table}").collect())

    def _frame(self, sql: str, args: Mapping[str, Any] | None = None) -> Any:
        return self.spark.sql(sql, args=dict(args) if args else None)

    async def close(self) -> None:
        """Close this session's channel and let the threads finish.

        Not stop() nor release_session(): they wait on and shut down the client's thread
        pool, which every session of the process shares, so another store's run would lose
        its calls. The server ends the idle session on its own.
        """
        self._pool.shutdown(wait=False, cancel_futures=True)
        channel = getattr(self.spark.client, "_channel", None)
        if channel is not None:
            channel.close()


def _connect(store: SparkStore) -> SparkSession:
    url = store.url
    if store.token is not None:
        url = f"{url.rstrip('/')}/;token={store.token.reveal()}"
    spark = SparkSession.builder.remote(url).create()
    # A handful of quick retries: the default policy waits up to ten minutes for a server.
    spark.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=1000)])
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.sql("SELECT 1").collect()
    return spark


async def store_pool(store: SparkStore) -> ConnectSession:
    """Open the store's session and check the server answers; failures are StoreErrors."""
    try:
        spark = await asyncio.wait_for(asyncio.to_thread(_quiet, _connect, store), store.timeout)
    except SecretError as exc:
        raise StoreQueryError(store.name, f"token: {exc}") from None
    except (*DRIVER_ERRORS, TimeoutError) as exc:
        raise store_error(store.name, f"connect to {store.url}", exc) from exc
    return ConnectSession(store, spark)


def _quiet(work: Callable[[SparkStore], T], store: SparkStore) -> T:
    with warnings.catch_warnings():
        # The client warns before it raises when its retries run out: the error says it.
        warnings.simplefilter("ignore", UserWarning)
        return work(store)


driver_error = of_types(DRIVER_ERRORS)  # TimeoutError is an OSError


def store_error(store: str, what: str, exc: BaseException) -> StoreError:
    """Return our exception for a Spark Connect, network or timeout error."""
    message = _message(exc)
    # The client reports a server it cannot reach as a gRPC error whose text says so.
    gone = isinstance(exc, SparkConnectGrpcException) and any(w in message for w in UNAVAILABLE)
    return server_error(
        store,
        what,
        exc,
        message,
        cancelled="OPERATION_CANCELED" in message,
        denied=any(word in message for word in PERMISSION),
        unreachable=isinstance(exc, OSError) or gone,
    )


translate_error = raising_translator(driver_error, store_error)


def _message(exc: BaseException) -> str:
    # The server's messages carry a JVM stack and the SQL's context: keep the first lines.
    text = str(exc) or type(exc).__name__
    return " ".join(" ".join(text.split("\n")[:3]).split())[:500]
