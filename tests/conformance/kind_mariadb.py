"""The mariadb kind's fixtures: a fresh database per table on the real local MariaDB.

Key columns use utf8mb4_unicode_ci, a collation that folds case and accents and pads
spaces, so the suite proves the adapter never lets the column's collation merge keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiomysql
from tools.local_stores import address

from driftgauge.config.frozen import View
from driftgauge.config.secrets import Secret
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.mariadb.dialect import MARIADB
from driftgauge.stores.mariadb.settings import MariaDBStore
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
from tests.conformance.sql_views import golden_view, spec_view
from tests.integration.conftest import TIMEOUT, unique_name

MARIADB_DSN = address("DRIFTGAUGE_TEST_MARIADB_DSN")
KEY = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
TYPES: dict[ColumnType, str] = {
    "key": KEY,
    "text": "TEXT CHARACTER SET utf8mb4",
    "instant": "DATETIME(6)",
    "instant_ms": "DATETIME(3)",
    "naive_ms": "DATETIME(3)",
    "decimal": "DECIMAL(12,2)",
    "integer": "BIGINT",
    "boolean": "BOOLEAN",
}
"""`analyzed` has no column here, as in PostgreSQL."""
GOLDEN_TYPES = {
    "string": "TEXT CHARACTER SET utf8mb4",
    "integer": "BIGINT",
    "decimal": "DECIMAL(65,30)",
    "boolean": "BOOLEAN",
    "timestamp": "DATETIME(6)",
}


def dsn_for(database: str, base: str = MARIADB_DSN) -> str:
    """Return the test server's DSN pointed at another database."""
    return base.rsplit("/", 1)[0] + "/" + database


def store(dsn: str, timeout: float = TIMEOUT) -> MariaDBStore:
    """Return a MariaDBStore for a DSN."""
    return MariaDBStore(name="my", dsn=Secret(dsn), timeout=timeout, pool_max=2)


async def connect(dsn: str = MARIADB_DSN) -> Any:
    """Return a plain autocommit connection for setting up data."""
    parts = urlsplit(dsn)
    return await aiomysql.connect(
        host=parts.hostname,
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        db=parts.path.strip("/"),
        autocommit=True,
        charset="utf8mb4",
        init_command="SET time_zone = '+00:00'",
    )


async def execute(
    sql: str, args: Any = None, *, many: bool = False, dsn: str = MARIADB_DSN
) -> None:
    """Run one statement (or one per row of `args` with `many`) on its own connection."""
    conn = await connect(dsn)
    try:
        async with conn.cursor() as cur:
            await (cur.executemany(sql, args) if many else cur.execute(sql, args))
    finally:
        conn.close()


async def new_database() -> str:
    """Create a uniquely named utf8mb4 database and return its DSN."""
    name = unique_name("dg_conf")
    await execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    return dsn_for(name)


async def drop_database(dsn: str) -> None:
    """Drop the database a DSN points at."""
    await execute(f"DROP DATABASE IF EXISTS `{dsn.rsplit('/', 1)[1]}`")


def utc_naive(value: Any) -> Any:
    """Return an aware datetime as naive UTC (how the columns hold instants)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _quote(value: Any) -> str:
    """Return a MariaDB string literal (backslashes are escapes there)."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


def view(dsn: str, spec: Spec, relation: str, timeout: float | None = None) -> View:
    """Return the View a check would have on `relation` of the database as `spec` says."""
    return spec_view(store(dsn, timeout or TIMEOUT), spec, relation, quote=_quote)


async def insert(dsn: str, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert rows (aware datetimes stored as UTC)."""
    if not rows:
        return
    marks = ", ".join(["%s"] * len(rows[0]))
    await execute(
        f"INSERT INTO `{table}` VALUES ({marks})",
        [tuple(utc_naive(v) for v in row) for row in rows],
        many=True,
        dsn=dsn,
    )


class MariaDBSource:
    """A table in its own database."""

    def __init__(self, table: Table, dsn: str) -> None:
        self.table = table
        self.dsn = dsn

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a MariaDB adapter on the table."""
        return await open_adapter(view(self.dsn, spec, self.table.name))

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Delete the rows with that id (compared as bytes) and insert `rows`."""
        await execute(
            f"DELETE FROM `{self.table.name}` WHERE BINARY `{self.table.id_column}` = %s",
            (row_id,),
            dsn=self.dsn,
        )
        await insert(self.dsn, self.table.name, rows)

    async def open_hung(self, spec: Spec, store_timeout: float) -> ProxiedHung:
        """Return an adapter reaching the database through a TCP fault proxy."""

        async def opener(dsn: str) -> StoreAdapter:
            return await open_adapter(view(dsn, spec, self.table.name, store_timeout))

        return await open_proxied(self.dsn, 3306, opener)

    async def drop(self) -> None:
        """Drop the database."""
        await drop_database(self.dsn)


def _golden_value(value: Any, type_: str) -> Any:
    if value is None or type_ != "timestamp":
        return value
    return utc_naive(datetime.fromisoformat(value))  # a value without zone is UTC already


class MariaDBGolden:
    """One table per vector holding its row with real column types."""

    def __init__(self, dsn: str, vectors: Sequence[dict[str, Any]], at: datetime) -> None:
        self.dsn = dsn
        self.vectors = vectors
        self.at = at

    async def create(self) -> None:
        """Create and fill one table per vector."""
        for n, vector in enumerate(self.vectors):
            key = KEY if vector["key_type"] == "string" else "BIGINT"
            cols = [f"k {key}", "t DATETIME(6)"]
            cols += [f"c{i} {GOLDEN_TYPES[f['type']]}" for i, f in enumerate(vector["fields"])]
            await execute(f"CREATE TABLE g{n} ({', '.join(cols)})", dsn=self.dsn)
            row = (
                vector["key"],
                utc_naive(self.at),
                *(_golden_value(f["value"], f["type"]) for f in vector["fields"]),
            )
            await insert(self.dsn, f"g{n}", [row])

    def view(self, n: int) -> View:
        """Return a view over vector n's table."""
        return golden_view(store(self.dsn), self.vectors[n], table=f"g{n}")

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return an adapter on vector n's table (decimals are DECIMAL(65,30))."""
        assert not double
        return await open_adapter(self.view(n))

    async def encoding(self, n: int) -> str:
        """Return what the dialect's encoding SQL computes for vector n's row."""
        view_ = self.view(n)
        conn = await connect(self.dsn)
        try:
            async with conn.cursor() as cur:
                await cur.execute(
                    f"SELECT {MARIADB.row_encoding_sql(view_)} FROM {MARIADB.relation(view_)}"
                )
                (value,) = await cur.fetchone()
        finally:
            conn.close()
        return str(value)

    async def drop(self) -> None:
        """Drop the database."""
        await drop_database(self.dsn)


class MariaDBFixtures:
    """Fixtures of the mariadb kind."""

    capabilities = frozenset(
        {ENGINE_ENCODING, STORE_ERRORS, FIELD_ERRORS, ROW_CHANGES, TIMEOUTS, DESCRIBES_FIELDS}
    )
    failures: Failures | None = Failures(
        unreachable_match="my: connect",
        missing_match=("no_such_table", "1146"),
    )

    async def load(self, table: Table) -> MariaDBSource:
        """Create a database holding the table (and its time index) and return it."""
        dsn = await new_database()
        columns = ", ".join(f"`{name}` {TYPES[type_]}" for name, type_ in table.columns)
        index = "" if table.time_index is None else f", INDEX (`{table.time_index}`)"
        await execute(f"CREATE TABLE `{table.name}` ({columns}{index})", dsn=dsn)
        await insert(dsn, table.name, list(table.rows))
        return MariaDBSource(table, dsn)

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> MariaDBGolden:
        """Return one table per vector in a fresh database."""
        golden = MariaDBGolden(await new_database(), vectors, at)
        await golden.create()
        return golden

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a port nothing listens at (the pool connects when opened)."""
        return await open_adapter(
            view(dsn_for("mysql", "mysql://root@127.0.0.1:1/x"), spec, "items")
        )
