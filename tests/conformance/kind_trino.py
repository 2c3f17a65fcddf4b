"""The trino kind's fixtures: each table Parquet files under an external Hive table in Trino.

The server is the local one of deploy/local/trino.sh (`make services` starts it), at
DRIFTGAUGE_TEST_TRINO_URL or the address stack.sh derives; its `hive` catalog keeps a
file metastore and reads the files from the local file system.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tools.local_stores import address

from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.trino import io
from driftgauge.stores.trino.dialect import TRINO
from driftgauge.stores.trino.settings import TrinoStore
from tests.conformance.parquet import Engine, EngineTable
from tests.conformance.spec import (
    DESCRIBES_FIELDS,
    ENGINE_ENCODING,
    FIELD_ERRORS,
    ROW_CHANGES,
    STORE_ERRORS,
    ColumnType,
    Failures,
    Hung,
    Spec,
    Table,
)
from tests.conformance.sql_views import (
    QueryGolden,
    cast_literal,
    unreachable_view,
)
from tests.integration.conftest import TIMEOUT

TRINO_URL = address("DRIFTGAUGE_TEST_TRINO_URL")
SCHEMA = "hive.dg_conformance"
COLUMNS: dict[ColumnType, str] = {
    "key": "varchar",
    "text": "varchar",
    "instant": "timestamp(6)",
    "instant_ms": "timestamp(6)",
    "naive_ms": "timestamp(6)",
    "decimal": "decimal(12,2)",
    "integer": "bigint",
    "boolean": "boolean",
}
"""The Hive table's column types over the Parquet files: Hive timestamps have no zone (UTC) and
the catalog's one precision (microseconds)."""
GOLDEN_TYPES = {
    "string": "VARCHAR",
    "integer": "BIGINT",
    "decimal": "DECIMAL(38,18)",
    "boolean": "BOOLEAN",
}


def store(url: str = TRINO_URL, timeout: float = TIMEOUT) -> TrinoStore:
    """Return a TrinoStore on the test server."""
    return TrinoStore("trino", url, timeout=timeout)


def quote(value: Any) -> str:
    """Return a Trino SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


ENGINE = Engine(store, quote, io.store_pool)
run = ENGINE.run


class TrinoSource(EngineTable):
    """An external Hive table over one Parquet file in a directory of its own."""

    engine = ENGINE

    def __init__(self, table: Table, folder: Path, name: str) -> None:
        super().__init__(table, folder, f"{SCHEMA}.{name}")

    def create_sql(self) -> str:
        """Return the statement creating the external table over the file's folder."""
        columns = ", ".join(f'"{n}" {COLUMNS[type_]}' for n, type_ in self.table.columns)
        return (
            f"CREATE TABLE {self.name} ({columns}) WITH (format = 'PARQUET', "
            f"external_location = {quote('local://' + str(self.path.parent))})"
        )

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """Not claimed (TIMEOUTS): the timeout test cancels a slow query on the server."""
        raise NotImplementedError


def _timestamp(value: str) -> tuple[str, str]:
    moment = datetime.fromisoformat(value)
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{moment.microsecond:06d}"
    )
    offset = moment.utcoffset()
    if offset is None:
        return text, "TIMESTAMP(6)"  # without time zone: must read as UTC
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{text} {sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}", (
        "TIMESTAMP(6) WITH TIME ZONE"
    )


def _literal(value: Any, type_: str) -> str:
    if type_ == "timestamp":
        if value is None:
            return "CAST(NULL AS TIMESTAMP(6) WITH TIME ZONE)"
        text, typ = _timestamp(value)
        return f"CAST({quote(text)} AS {typ})"
    typ = GOLDEN_TYPES[type_]
    return cast_literal(value, type_, typ, quote)


class TrinoFixtures:
    """Fixtures of the trino kind."""

    capabilities = frozenset(
        {ENGINE_ENCODING, STORE_ERRORS, FIELD_ERRORS, ROW_CHANGES, DESCRIBES_FIELDS}
    )
    failures: Failures | None = Failures(
        unreachable_match="connect to http://127.0.0.1:1",
        missing_relation=f"{SCHEMA}.no_such_table",
        missing_match=("no_such_table", "no_such_table"),
    )

    async def load(self, table: Table) -> TrinoSource:
        """Write the table to Parquet and create an external Hive table over it."""
        await run(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        return await TrinoSource.load(table, "dg_trino_")

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> QueryGolden:
        """Return one-row queries per vector."""
        return QueryGolden(
            vectors,
            store=store(),
            dialect=TRINO,
            run=run,
            literal=_literal,
            time_literal=_literal(at.isoformat(), "timestamp"),
        )

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a port nothing listens at (the session checks when opened)."""
        return await open_adapter(unreachable_view(store("http://127.0.0.1:1"), spec))
