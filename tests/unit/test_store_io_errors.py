"""One error map per technology: each driver error maps to ours, anything else propagates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

import asyncpg
import opensearchpy as osp
import pytest

from driftgauge.core.errors import (
    StateError,
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.pg import calls, errors
from driftgauge.stores import registry
from driftgauge.stores.opensearch import retry
from driftgauge.stores.opensearch.client import translate_error
from driftgauge.stores.postgres.adapter import PostgresAdapter
from tests.integration.conftest import make_view, pg_store

DAY = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
PG_MAPPED: list[tuple[BaseException, type[StoreError]]] = [
    (TimeoutError(), StoreTimeout),
    (asyncpg.QueryCanceledError("canceling statement"), StoreTimeout),
    (asyncpg.InsufficientPrivilegeError("permission denied"), StorePermissionError),
    (asyncpg.InvalidPasswordError("password authentication failed"), StorePermissionError),
    (asyncpg.InvalidCatalogNameError("database does not exist"), StoreUnavailable),
    (asyncpg.TooManyConnectionsError("too many clients"), StoreUnavailable),
    (ConnectionRefusedError(111, "refused"), StoreUnavailable),
    (asyncpg.UndefinedTableError("relation does not exist"), StoreQueryError),
    (asyncpg.InterfaceError("pool is closed"), StoreQueryError),
]
OS_MAPPED: list[tuple[BaseException, type[StoreError]]] = [
    (osp.ConnectionTimeout("TIMEOUT", "read timeout", TimeoutError()), StoreTimeout),
    (TimeoutError(), StoreTimeout),
    (osp.ConnectionError("N/A", "refused", OSError()), StoreUnavailable),
    (osp.TransportError(403, "security_exception", None), StorePermissionError),
    (osp.TransportError(404, "index_not_found_exception", None), StoreQueryError),
    (osp.TransportError(429, "es_rejected_execution_exception", None), StoreUnavailable),
    (osp.TransportError(400, "parsing_exception", None), StoreQueryError),
    (osp.SerializationError("not JSON"), StoreQueryError),
]
BUGS = [
    KeyError("k"),
    TypeError("bad call"),
    ValueError("our own check"),
    AttributeError("x"),
    ZeroDivisionError(),
]


@pytest.mark.parametrize(("exc", "mapped"), PG_MAPPED, ids=lambda v: type(v).__name__)
def test_each_postgres_driver_error_maps(exc: BaseException, mapped: type[StoreError]) -> None:
    got = registry.kind_of("postgres").error_map("pg", "read", exc)
    assert type(got) is mapped and str(got).startswith("pg: read")
    with pytest.raises(mapped) as raised, errors.store_errors("pg", "read"):
        raise exc
    assert raised.value.__cause__ is exc
    assert isinstance(errors.state_error("read", exc, 1.0), StateError)


@pytest.mark.parametrize(("exc", "mapped"), OS_MAPPED, ids=lambda v: type(v).__name__)
def test_each_opensearch_client_error_maps(exc: BaseException, mapped: type[StoreError]) -> None:
    assert type(translate_error("os", "read", exc)) is mapped
    assert type(registry.kind_of("opensearch").error_map("os", "read", exc)) is mapped


@pytest.mark.parametrize("bug", BUGS, ids=lambda v: type(v).__name__)
def test_an_unmapped_exception_maps_to_nothing_and_propagates(bug: BaseException) -> None:
    for kind in registry.kinds().values():
        try:
            mapped = kind.error_map("s", "read", bug)
        except type(bug) as raised:
            assert raised is bug, kind.name  # re-raised as itself
        else:
            assert mapped is None, kind.name
    with pytest.raises(type(bug)), errors.store_errors("pg", "read"):
        raise bug


class BrokenConnection:
    """A connection whose every query raises the exception it was given."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.terminated = False

    async def fetch(self, *args: Any, **kw: Any) -> Any:
        raise self.exc

    fetchval = execute = fetch

    def transaction(self, **kw: Any) -> Any:
        """Return a transaction block that lets what its queries raise through."""
        return nullcontext()

    def terminate(self) -> None:
        self.terminated = True


class OnePool:
    """A pool handing out one BrokenConnection (our own fake of the driver's pool)."""

    def __init__(self, exc: BaseException) -> None:
        self.conn = BrokenConnection(exc)

    async def acquire(self, **timeout: float) -> BrokenConnection:
        return self.conn

    async def release(self, conn: Any) -> None:
        return None


def _adapter(exc: BaseException) -> PostgresAdapter:
    view = make_view(
        pg_store("postgresql://u@127.0.0.1:1/db"), key="k", time="ts", fields={}, table="t"
    )
    return PostgresAdapter(view, OnePool(exc), owns_pool=False)


async def test_a_bug_inside_a_postgres_read_propagates_as_itself() -> None:
    adapter = _adapter(ZeroDivisionError())
    with pytest.raises(ZeroDivisionError):
        await adapter.bucket_digests(*DAY, "day")


async def test_a_postgres_driver_error_in_a_read_is_our_store_error() -> None:
    adapter = _adapter(asyncpg.UndefinedTableError('relation "t" does not exist'))
    with pytest.raises(StoreQueryError, match="bucket digests on t"):
        await adapter.bucket_digests(*DAY, "day")


class StatePool:
    """A pool whose acquire() yields a connection to a block that raises."""

    def acquire(self) -> Any:
        @asynccontextmanager
        async def conn() -> AsyncIterator[object]:
            yield object()

        return conn()


@pytest.mark.parametrize(
    ("exc", "mapped"), [(OSError("reset"), StateError), (KeyError("k"), KeyError)]
)
async def test_state_calls_map_driver_errors_and_let_bugs_through(
    exc: BaseException, mapped: type[BaseException]
) -> None:
    with pytest.raises(mapped):
        async with calls.PgCalls(StatePool(), 1.0).conn("read"):
            raise exc


async def test_a_bug_in_an_opensearch_read_is_neither_retried_nor_a_store_error() -> None:
    calls = 0

    async def make() -> Any:
        nonlocal calls
        calls += 1
        raise KeyError("hits")

    with pytest.raises(KeyError):
        await retry.call(make, store="os", what="read", translate=translate_error)
    assert calls == 1
