"""The postgres store kind: its config, its view rules and how to open it (driver loaded lazily)."""

from __future__ import annotations

from driftgauge.config import secrets
from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.stores import registry
from driftgauge.stores.postgres.settings import PostgresStore, PostgresStoreModel
from driftgauge.stores.sql.views import sql_kind


def build(name: str, sm: PostgresStoreModel, problems: list[str]) -> PostgresStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    problems.extend(secrets.dsn_problems(f"stores.{name}.dsn", sm.dsn))
    return PostgresStore(name, Secret(sm.dsn), sm.timeout_seconds, sm.pool_max)


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return the store's DSN reference."""
    assert isinstance(store, PostgresStore)
    return [("dsn", store.dsn, "dsn")]


KIND = sql_kind(
    __package__,
    "PostgresAdapter",
    PostgresStoreModel,
    build=build,
    secrets=store_secrets,
    extra=frozenset({registry.LOOKUP3_ROW_HASH}),
)
