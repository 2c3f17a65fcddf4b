"""Tables kept as one Parquet file: the sources of the duckdb, spark and trino kinds."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

import duckdb

from driftgauge.config.frozen import View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from tests.conformance.spec import ColumnType, Spec, Table
from tests.conformance.sql_views import Quote, spec_view, sql_quote
from tests.integration.conftest import TIMEOUT, unique_name

TYPES: dict[ColumnType, str] = {
    "key": "VARCHAR",
    "text": "VARCHAR",
    "instant": "TIMESTAMPTZ",
    "instant_ms": "TIMESTAMPTZ",
    "naive_ms": "TIMESTAMP_MS",
    "decimal": "DECIMAL(12,2)",
    "integer": "BIGINT",
    "boolean": "BOOLEAN",
}
"""DuckDB's types of the Parquet files; `analyzed` has no column: DuckDB has no analyzed text
a row could be read from."""


def write_parquet(
    path: Path, columns: Sequence[tuple[str, str]], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Write rows to one Parquet file with the given DuckDB column types."""
    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute(f"CREATE TABLE t ({', '.join(f'{n} {t}' for n, t in columns)})")
        if rows:
            lists = [list(col) for col in zip(*rows, strict=True)]
            picks = ", ".join(f"unnest(${i + 1})" for i in range(len(columns)))
            conn.execute(f"INSERT INTO t SELECT {picks}", lists)
        conn.execute(f"COPY t TO {sql_quote(path)} (FORMAT parquet)")
    finally:
        conn.close()


class ParquetRows:
    """A table's rows as the Parquet file `path`; a new export rewrites it via `staging`."""

    def __init__(self, table: Table, path: Path, staging: Path) -> None:
        self.table = table
        self.path = path
        self.staging = staging
        self.columns = [(name, TYPES[type_]) for name, type_ in table.columns]
        self.rows = list(table.rows)

    def write(self) -> None:
        """Write the rows to the file."""
        write_parquet(self.path, self.columns, self.rows)

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rewrite the file without the rows of that id and with `rows` (a new export)."""
        at = [n for n, _ in self.table.columns].index(str(self.table.id_column))
        self.rows = [r for r in self.rows if r[at] != row_id] + list(rows)
        write_parquet(self.staging, self.columns, self.rows)
        self.staging.replace(self.path)


@dataclass(frozen=True)
class Engine:
    """How the fixtures reach a SQL engine: its store, its string literals, its sessions."""

    store: Callable[..., Any]
    quote: Quote
    pool: Callable[[Any], Awaitable[Any]]
    """The engine's io.store_pool: a session on a store."""

    async def run(self, sql: str) -> list[dict[str, Any]]:
        """Run one statement on a session of its own."""
        session = await self.pool(self.store())
        try:
            rows: list[dict[str, Any]] = await session.fetch(sql)
            return rows
        finally:
            await session.close()


class EngineTable(ParquetRows):
    """An engine's table over data/part-0.parquet in the directory `folder` of its own."""

    engine: ClassVar[Engine]

    def __init__(self, table: Table, folder: Path, name: str) -> None:
        # The rewrite is staged outside data/, where the engine would read it as a part.
        super().__init__(table, folder / "data" / "part-0.parquet", folder / "part-0.parquet.new")
        self.folder = folder
        self.name = name

    @classmethod
    async def load(cls, table: Table, prefix: str) -> Self:
        """Write `table` into a fresh directory named with `prefix` and create the table."""
        folder = Path(tempfile.mkdtemp(prefix=prefix))
        source = cls(table, folder, unique_name(f"dg_{table.name}"))
        await source.create()
        return source

    def create_sql(self) -> str:
        """Return the statement creating the engine's table over data/."""
        raise NotImplementedError

    async def create(self) -> None:
        """Write the file and create the engine's table over its folder."""
        self.path.parent.mkdir(parents=True)
        self.write()
        await self.engine.run(self.create_sql())

    def view(self, spec: Spec, timeout: float = TIMEOUT) -> View:
        """Return the View a check would have on the table as `spec` says."""
        return spec_view(
            self.engine.store(timeout=timeout), spec, self.name, quote=self.engine.quote
        )

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return an adapter of the engine's kind on the table."""
        return await open_adapter(self.view(spec))

    async def drop(self) -> None:
        """Drop the table (its files are external) and remove the directory."""
        try:
            await self.engine.run(f"DROP TABLE IF EXISTS {self.name}")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
