"""The duckdb store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from driftgauge.config.values import NonEmpty, Seconds, Strict
from driftgauge.stores.registry import StoreLimits, StoreModel

FileFormat = Literal["parquet", "csv"]


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class FileTable:
    """A table read from Parquet or CSV files: a path or glob, optionally hive-partitioned."""

    name: str
    format: FileFormat
    path: str
    hive_partitioning: bool = False

    @property
    def field(self) -> str:
        """Return where the config names this table's path, for messages."""
        return f"files.{self.name}.{self.format}"

    def reader(self) -> str:
        """Return the DuckDB table function reading the files."""
        hive = "true" if self.hive_partitioning else "false"
        return f"read_{self.format}({_literal(self.path)}, hive_partitioning = {hive})"


@dataclass(frozen=True)
class DuckDBStore(StoreLimits):
    """An embedded DuckDB: a database file opened read-only, and tables over files."""

    name: str
    database: str | None = None
    files: tuple[FileTable, ...] = ()
    timeout: float = 30.0
    threads: int = 2
    kind: str = "duckdb"

    def file_table(self, name: str | None) -> FileTable | None:
        """Return the file table called `name`, if the store has one."""
        return next((f for f in self.files if f.name == name), None)


class DuckDBFilesModel(Strict):
    """One table over files; exactly one of `parquet` or `csv`."""

    parquet: NonEmpty | None = Field(
        None, description="Path or glob of Parquet files, e.g. exports/orders/**/*.parquet."
    )
    csv: NonEmpty | None = Field(
        None, description="Path or glob of CSV files (with a header line)."
    )
    hive_partitioning: bool = Field(False, description="Read key=value folder names as columns.")

    @model_validator(mode="after")
    def _one_format(self) -> DuckDBFilesModel:
        if (self.parquet is None) == (self.csv is None):
            raise ValueError("give exactly one of 'parquet' or 'csv'")
        return self


class DuckDBStoreModel(StoreModel):
    kind: Literal["duckdb"]
    database: NonEmpty | None = Field(
        None, description="A DuckDB database file, opened read-only; omitted: only `files` tables."
    )
    files: dict[NonEmpty, DuckDBFilesModel] = Field(
        default_factory=dict,
        description="Table name to the Parquet or CSV files it reads; "
        "a view names it as its `table`.",
    )
    timeout_seconds: Seconds = 30.0
    threads: int = Field(2, ge=1, le=64, description="Threads DuckDB may use per query.")
