"""The duckdb store kind: its config, its view rules and how to open it (engine loaded lazily)."""

from __future__ import annotations

from typing import Any

from driftgauge.config.runtime import Store, View
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import StoreError
from driftgauge.stores import registry
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.duckdb.settings import DuckDBStore, DuckDBStoreModel, FileTable
from driftgauge.stores.sql.views import sql_view_check


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
    return DuckDBStore(name, sm.database, files, sm.timeout_seconds, sm.threads)


check_view = sql_view_check("duckdb")


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return no secrets: an embedded database has no credentials."""
    return []


async def connect(store: Store) -> Any:
    """Return the connection every view of the store shares."""
    from driftgauge.stores.duckdb import io

    assert isinstance(store, DuckDBStore)
    return await io.connect(store)


async def disconnect(conn: Any) -> None:
    """Close a connection opened by connect."""
    await conn.close()


async def open_adapter(view: View, conn: Any) -> StoreAdapter:
    """Return a DuckDB adapter on the shared connection, or on its own when None."""
    from driftgauge.stores.duckdb.adapter import DuckDBAdapter

    return await DuckDBAdapter.open(view, conn)


def error_map(store: str, what: str, exc: BaseException) -> StoreError:
    """Return our exception for a DuckDB or file error (others propagate)."""
    from driftgauge.stores.duckdb import io

    return io.translate_error(store, what, exc)


KIND = registry.StoreKind(
    name="duckdb",
    config_model=DuckDBStoreModel,
    build=build,
    check_view=check_view,
    connect=connect,
    disconnect=disconnect,
    open=open_adapter,
    error_map=error_map,
    secrets=store_secrets,
    capabilities=frozenset(
        {
            registry.COMPOSITE_KEYS,
            registry.MEASURE_TOTALS,
            registry.SLOT_FIRST_PASS,
            registry.VOCABULARY_COUNTER,
            registry.KEY_PICKER,
        }
    ),
)
