"""The postgres kind's fixtures: a fresh UTF8 database per table on the real PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import asyncpg

from driftgauge.config.frozen import View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.postgres.dialect import POSTGRES as pg_sql
from tests.conformance.proxied import ProxiedHung, open_proxied
from tests.conformance.spec import (
    DESCRIBES_FIELDS,
    ENGINE_ENCODING,
    FIELD_ERRORS,
    ROW_CHANGES,
    STORE_ERRORS,
    TIMEOUTS,
    ColumnType,
    Failures,
    Spec,
    Table,
)
from tests.conformance.sql_views import golden_names, golden_type, golden_view, spec_view
from tests.integration.conftest import PG_DSN, TIMEOUT, dsn_for, pg_store, unique_name

TYPES: dict[ColumnType, str] = {
    "key": "text",
    "text": "text",
    "instant": "timestamptz",
    "instant_ms": "timestamptz",
    "naive_ms": "timestamp(3) without time zone",
    "decimal": "numeric(12,2)",
    "integer": "bigint",
    "boolean": "boolean",
}
"""`analyzed` has no column here: PostgreSQL has no analyzed text a row could be read from."""
GOLDEN_TYPES = {"string": "text", "integer": "bigint", "decimal": "numeric", "boolean": "boolean"}


async def _admin(sql: str) -> None:
    """Run one statement on the server's admin database."""
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    try:
        await admin.execute(sql, timeout=TIMEOUT)
    finally:
        await admin.close()


async def _new_database() -> str:
    name = unique_name("dg_conf")
    await _admin(f"CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0")
    return dsn_for(name)


async def _drop_database(dsn: str) -> None:
    await _admin(f'DROP DATABASE IF EXISTS "{dsn.rsplit("/", 1)[1]}" WITH (FORCE)')


def view(dsn: str, spec: Spec, relation: str, timeout: float | None = None) -> View:
    """Return the View a check would have on `relation` of the database as `spec` says."""
    store = pg_store(dsn)
    if timeout is not None:
        store = replace(store, timeout=timeout)
    return spec_view(store, spec, relation)


class PostgresSource:
    """A table in its own database."""

    def __init__(self, table: Table, dsn: str) -> None:
        self.table = table
        self.dsn = dsn

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a PostgreSQL adapter on the table."""
        return await open_adapter(view(self.dsn, spec, self.table.name))

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Delete the rows with that id and copy `rows` in."""
        conn = await asyncpg.connect(self.dsn, timeout=TIMEOUT)
        try:
            await conn.execute(
                f"DELETE FROM {self.table.name} WHERE {self.table.id_column} = $1",
                row_id,
                timeout=TIMEOUT,
            )
            await conn.copy_records_to_table(self.table.name, records=list(rows), timeout=TIMEOUT)
        finally:
            await conn.close()

    async def open_hung(self, spec: Spec, store_timeout: float) -> ProxiedHung:
        """Return an adapter reaching the database through a TCP fault proxy."""

        async def opener(dsn: str) -> StoreAdapter:
            return await open_adapter(view(dsn, spec, self.table.name, store_timeout))

        return await open_proxied(self.dsn, 5432, opener)

    async def drop(self) -> None:
        """Drop the database."""
        await _drop_database(self.dsn)


def _literal(value: Any, type_: str) -> str:
    pg_type = golden_type(GOLDEN_TYPES, type_, value, "timestamp", "timestamptz")
    if value is None:
        return f"NULL::{pg_type}"
    if type_ == "boolean":
        return "TRUE" if value else "FALSE"
    return "'" + str(value).replace("'", "''") + f"'::{pg_type}"


class PostgresGolden:
    """One-row VALUES queries holding each vector with real column types."""

    def __init__(self, dsn: str, vectors: Sequence[dict[str, Any]], at: datetime) -> None:
        self.dsn = dsn
        self.vectors = vectors
        self.at = at

    def view(self, n: int) -> View:
        """Return a view over vector n's one-row query."""
        vector = self.vectors[n]
        cols = [
            _literal(vector["key"], vector["key_type"]),
            f"'{self.at.isoformat()}'::timestamptz",
        ]
        cols += [_literal(f["value"], f["type"]) for f in vector["fields"]]
        names = ", ".join(golden_names(vector))
        query = f"SELECT * FROM (VALUES ({', '.join(cols)})) AS v({names})"
        return golden_view(pg_store(self.dsn), vector, query=query)

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return an adapter on vector n's query (PostgreSQL keeps decimals as numeric)."""
        assert not double
        return await open_adapter(self.view(n))

    async def encoding(self, n: int) -> str:
        """Return what the dialect's encoding SQL computes for vector n's row."""
        view_ = self.view(n)
        conn = await asyncpg.connect(self.dsn, timeout=TIMEOUT, server_settings={"TimeZone": "UTC"})
        try:
            return str(
                await conn.fetchval(
                    f"SELECT {pg_sql.row_encoding_sql(view_)} FROM {pg_sql.relation(view_)}"
                )
            )
        finally:
            await conn.close()

    async def drop(self) -> None:
        """Drop the database."""
        await _drop_database(self.dsn)


class PostgresFixtures:
    """Fixtures of the postgres kind."""

    capabilities = frozenset(
        {ENGINE_ENCODING, STORE_ERRORS, FIELD_ERRORS, ROW_CHANGES, TIMEOUTS, DESCRIBES_FIELDS}
    )
    failures: Failures | None = Failures(
        unreachable_match="pg: connect",
        missing_match=("no_such_table", "42P01"),
    )

    async def load(self, table: Table) -> PostgresSource:
        """Create a database holding the table (and its time index) and return it."""
        dsn = await _new_database()
        columns = ", ".join(f"{name} {TYPES[type_]}" for name, type_ in table.columns)
        conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
        try:
            await conn.execute(f"CREATE TABLE {table.name} ({columns})", timeout=TIMEOUT)
            await conn.copy_records_to_table(table.name, records=list(table.rows), timeout=TIMEOUT)
            if table.time_index is not None:
                await conn.execute(
                    f"CREATE INDEX {table.name}_{table.time_index}_idx ON "
                    f"{table.name} ({table.time_index}); ANALYZE {table.name}",
                    timeout=TIMEOUT,
                )
        finally:
            await conn.close()
        return PostgresSource(table, dsn)

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> PostgresGolden:
        """Return one-row queries per vector in a fresh database."""
        return PostgresGolden(await _new_database(), vectors, at)

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a port nothing listens at (PostgreSQL connects when opened)."""
        return await open_adapter(view("postgresql://postgres@127.0.0.1:1/postgres", spec, "items"))
