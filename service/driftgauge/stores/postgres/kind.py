"""The postgres store kind: its config, its view rules and how to open it (driver loaded lazily)."""

from __future__ import annotations

from driftgauge.config import secrets
from driftgauge.config.runtime import Store
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import StoreError
from driftgauge.stores import registry
from driftgauge.stores.postgres.settings import PostgresStore, PostgresStoreModel
from driftgauge.stores.sql.pooled import pool_hooks
from driftgauge.stores.sql.views import sql_view_check


def build(name: str, sm: PostgresStoreModel, problems: list[str]) -> PostgresStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    problems.extend(secrets.dsn_problems(f"stores.{name}.dsn", sm.dsn))
    return PostgresStore(name, Secret(sm.dsn), sm.timeout_seconds, sm.pool_max)


check_view = sql_view_check("postgres")


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return the store's DSN reference."""
    assert isinstance(store, PostgresStore)
    return [("dsn", store.dsn, "dsn")]


connect, disconnect, open_adapter = pool_hooks(
    "driftgauge.stores.postgres", PostgresStore, "PostgresAdapter"
)


def error_map(store: str, what: str, exc: BaseException) -> StoreError | None:
    """Return our exception for an asyncpg or socket error; None for anything else (a bug)."""
    from driftgauge.stores.postgres import io

    return io.store_error(store, what, exc) if io.driver_error(exc) else None


KIND = registry.StoreKind(
    name="postgres",
    config_model=PostgresStoreModel,
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
            registry.LOOKUP3_ROW_HASH,
        }
    ),
)
