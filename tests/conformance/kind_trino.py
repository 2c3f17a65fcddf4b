"""The trino kind's fixtures: each table Parquet files under an external Hive table in Trino.

The server is the local one of deploy/local/trino.sh (`make services` starts it), at
DRIFTGAUGE_TEST_TRINO_URL or the address stack.sh derives; its `hive` catalog keeps a
file metastore and reads the files from the local file system.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tools.local_stores import address

from driftgauge.config.frozen import View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.trino import io
from driftgauge.stores.trino.dialect import TRINO
from driftgauge.stores.trino.settings import TrinoStore
from tests.conformance.kind_duckdb import write_parquet
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
    spec_view,
    unreachable_view,
)
from tests.integration.conftest import TIMEOUT, unique_name

TRINO_URL = address("DRIFTGAUGE_TEST_TRINO_URL")
SCHEMA = "hive.dg_conformance"
PARQUET: dict[ColumnType, str] = {
    "key": "VARCHAR",
    "text": "VARCHAR",
    "instant": "TIMESTAMPTZ",
    "instant_ms": "TIMESTAMPTZ",
    "naive_ms": "TIMESTAMP_MS",
    "decimal": "DECIMAL(12,2)",
    "integer": "BIGINT",
    "boolean": "BOOLEAN",
}
"""DuckDB's types of the Parquet files; `analyzed` has no column (no analyzed text here)."""
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
"""The Hive table's column types over those files: Hive timestamps have no zone (UTC) and
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


async def run(sql: str) -> list[dict[str, Any]]:
    """Run one statement on a session of its own."""
    session = await io.store_pool(store())
    try:
        return await session.fetch(sql)
    finally:
        await session.close()


class TrinoSource:
    """An external Hive table over one Parquet file in a directory of its own."""

    def __init__(self, table: Table, folder: Path, name: str) -> None:
        self.table = table
        self.folder = folder
        self.name = f"{SCHEMA}.{name}"
        self.path = folder / "data" / "part-0.parquet"
        self.columns = [(n, PARQUET[type_]) for n, type_ in table.columns]
        self.rows = list(table.rows)

    async def create(self) -> None:
        """Write the file and create the external table over its folder."""
        self.path.parent.mkdir(parents=True)
        write_parquet(self.path, self.columns, self.rows)
        columns = ", ".join(f'"{n}" {COLUMNS[type_]}' for n, type_ in self.table.columns)
        await run(
            f"CREATE TABLE {self.name} ({columns}) WITH (format = 'PARQUET', "
            f"external_location = {quote('local://' + str(self.path.parent))})"
        )

    def view(self, spec: Spec, timeout: float = TIMEOUT) -> View:
        """Return the View a check would have on the table as `spec` says."""
        return spec_view(store(timeout=timeout), spec, self.name, quote=quote)

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a Trino adapter on the table."""
        return await open_adapter(self.view(spec))

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rewrite the file without the rows of that id and with `rows` (a new export)."""
        at = [n for n, _ in self.table.columns].index(str(self.table.id_column))
        self.rows = [r for r in self.rows if r[at] != row_id] + list(rows)
        fresh = self.folder / "part-0.parquet.new"
        write_parquet(fresh, self.columns, self.rows)
        fresh.replace(self.path)

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """Not claimed (TIMEOUTS): the timeout test cancels a slow query on the server."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Drop the table (its files are external) and remove the directory."""
        try:
            await run(f"DROP TABLE IF EXISTS {self.name}")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


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
        unusable_field="label_text",
    )

    async def load(self, table: Table) -> TrinoSource:
        """Write the table to Parquet and create an external Hive table over it."""
        await run(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        folder = Path(tempfile.mkdtemp(prefix="dg_trino_"))
        source = TrinoSource(table, folder, unique_name(f"dg_{table.name}"))
        await source.create()
        return source

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
