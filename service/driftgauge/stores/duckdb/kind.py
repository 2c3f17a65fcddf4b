"""The duckdb store kind: its config, its view rules and how to open it (engine loaded lazily)."""

from __future__ import annotations

from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.stores.duckdb.settings import DuckDBStore, DuckDBStoreModel, FileTable
from driftgauge.stores.sql.views import sql_kind


def build(name: str, sm: DuckDBStoreModel, problems: list[str]) -> DuckDBStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    files = tuple(
        FileTable(
            table,
            "parquet" if fm.parquet is not None else "csv",
            fm.parquet if fm.parquet is not None else str(fm.csv),
            fm.hive_partitioning,
        )
        for table, fm in sm.files.items()
    )
    if sm.database is None and not files:
        problems.append(f"stores.{name}: a duckdb store needs a 'database' file or 'files'")
    if sm.parallel_scans > 1:
        # One embedded connection runs its queries one at a time; it has threads instead.
        problems.append(
            f"stores.{name}.parallel_scans: a duckdb store runs one query at a time;"
            " set `threads` to use more cores"
        )
    return DuckDBStore(name, sm.database, files, sm.timeout_seconds, sm.threads)


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return no secrets: an embedded database has no credentials."""
    return []


KIND = sql_kind(
    __package__,
    "DuckDBAdapter",
    DuckDBStoreModel,
    build=build,
    secrets=store_secrets,
)
