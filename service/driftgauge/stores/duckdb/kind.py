"""The duckdb store kind: its config, its view rules and how to open it (engine loaded lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from driftgauge.config.runtime import Store, View
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import StoreError
from driftgauge.stores import registry
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.duckdb.settings import DuckDBStore, DuckDBStoreModel, FileTable


def build(name: str, sm: DuckDBStoreModel, problems: list[str]) -> DuckDBStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    files = tuple(FileTable(table, "parquet" if fm.parquet is not None else "csv",
                            fm.parquet if fm.parquet is not None else str(fm.csv),
                            fm.hive_partitioning)
                  for table, fm in sm.files.items())
    if sm.database is None and not files:
        problems.append(f"stores.{name}: a duckdb store needs a 'database' file or 'files'")
    return DuckDBStore(name, sm.database, files, sm.timeout_seconds, sm.threads)


def check_view(where: str, vm: Any, exclusions: Sequence[Any], problems: list[str]) -> None:
    """Append what a duckdb view (and its source's exclusions) gets wrong."""
    if (vm.query is None) == (vm.table is None):
        problems.append(f"{where}: a duckdb view needs exactly one of 'query' or 'table'")
    for key in ("index", "filter"):
        if getattr(vm, key) is not None:
            problems.append(f"{where}.{key}: only for opensearch views")
    for i, ex in enumerate(exclusions):
        if ex.where is None or ex.query is not None:
            problems.append(f"{where.rsplit('.', 1)[0]}.exclusions.{i}: a duckdb source "
                            "excludes rows with 'where' (an SQL predicate)")


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
    name="duckdb", config_model=DuckDBStoreModel, build=build, check_view=check_view,
    connect=connect, disconnect=disconnect, open=open_adapter, error_map=error_map,
    secrets=store_secrets,
    capabilities=frozenset({registry.VOCABULARY_COUNTER, registry.KEY_PICKER}))
