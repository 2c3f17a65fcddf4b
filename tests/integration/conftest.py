"""Shared fixtures for tests on the real local PostgreSQL and OpenSearch.

Every test gets uniquely named databases and indexes and drops them afterwards,
because other people use the same servers at the same time.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from zoneinfo import ZoneInfo

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch
from tools.local_stores import address

from driftgauge.config.frozen import Field, KeyColumn, View, null_key_rule
from driftgauge.config.secrets import Secret
from driftgauge.stores.opensearch.settings import OpenSearchStore
from driftgauge.stores.postgres.settings import PostgresStore

# The shared checks' helpers assert; rewritten, their failures show the values compared.
pytest.register_assert_rewrite("tests.integration.kind_checks", "tests.integration.lake_orders")

PG_DSN = address("DRIFTGAUGE_TEST_PG_DSN")
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
TIMEOUT = 30.0


def unique_name(prefix: str) -> str:
    """Return a lowercase name no other test run will pick."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def dsn_for(database: str) -> str:
    """Return the test server's DSN pointed at another database."""
    return PG_DSN.rsplit("/", 1)[0] + "/" + database


def pg_store(dsn: str, name: str = "pg") -> PostgresStore:
    """Return a PostgresStore for a DSN with a short timeout."""
    return PostgresStore(name=name, dsn=Secret(dsn), timeout=TIMEOUT, pool_max=2)


def os_store(url: str = OS_URL, name: str = "os") -> OpenSearchStore:
    """Return an OpenSearchStore for a URL with a short timeout."""
    return OpenSearchStore(name=name, url=url, timeout=TIMEOUT)


def make_view(
    store: PostgresStore | OpenSearchStore,
    *,
    key: str | tuple[str, ...],
    time: str,
    fields: dict[str, tuple[str, str]],
    key_type: str | tuple[str, ...] = "string",
    tz: str = "UTC",
    **where: object,
) -> View:
    """Return a View; `fields` maps canonical name → (this side's column, type).

    A tuple `key` is a composite key of those columns (`key_type` one type or one per
    part); its view excludes rows with a NULL part as a source does, unless the store is
    a reader-only kind.
    """
    parts: tuple[KeyColumn, ...] = ()
    if isinstance(key, tuple):
        types = key_type if isinstance(key_type, tuple) else (key_type,) * len(key)
        parts = tuple(KeyColumn(c, c, t) for c, t in zip(key, types, strict=True))  # type: ignore[arg-type]
        if store.kind != "reader_api":
            where["exclusions"] = (null_key_rule(parts), *where.get("exclusions", ()))  # type: ignore[misc]
    return View(
        store=store,
        key_column=parts[0].column if parts else key,  # type: ignore[arg-type]
        time_column=time,
        columns=tuple(col for col, _ in fields.values()),
        fields=tuple(Field(name, typ) for name, (_, typ) in fields.items()),  # type: ignore[arg-type]
        key_type=parts[0].type if parts else key_type,  # type: ignore[arg-type]
        timezone=ZoneInfo(tz),
        key_parts=parts,
        **where,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
async def pg_database() -> AsyncIterator[str]:
    """Yield the DSN of a fresh UTF8 database, dropped after the module."""
    name = unique_name("dg_test")
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    try:
        await admin.execute(
            f"CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0", timeout=TIMEOUT
        )
        yield dsn_for(name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', timeout=TIMEOUT)
        await admin.close()


@pytest.fixture(scope="module")
async def orders_dsn() -> AsyncIterator[str]:
    """Yield a PostgreSQL database holding the 120 orders of kind_checks.make_orders."""
    # kind_checks imports this module's names, so it is imported only once both are loaded.
    from tests.integration.kind_checks import make_orders, orders_database

    async with orders_database(make_orders()) as dsn:
        yield dsn


@pytest.fixture(scope="module")
async def os_client() -> AsyncIterator[AsyncOpenSearch]:
    """Yield a raw OpenSearch client for loading test data."""
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=TIMEOUT)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="module")
async def os_index(os_client: AsyncOpenSearch) -> AsyncIterator[Callable[[str], str]]:
    """Yield a factory of unique index names; every index it named is deleted after."""
    names: list[str] = []

    def new(prefix: str = "dg_test") -> str:
        names.append(unique_name(prefix))
        return names[-1]

    try:
        yield new
    finally:
        for name in names:
            await os_client.indices.delete(index=name, ignore_unavailable=True)
