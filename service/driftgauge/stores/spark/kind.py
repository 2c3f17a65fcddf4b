"""The spark store kind: its config, its view rules and how to open it (client loaded lazily)."""

from __future__ import annotations

from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.stores.spark.settings import SparkStore, SparkStoreModel, url_shape
from driftgauge.stores.sql.views import lazy_error_map, sql_kind


def build(name: str, sm: SparkStoreModel, problems: list[str]) -> SparkStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    if problem := url_shape(sm.url):
        problems.append(f"stores.{name}.url: {problem}")
    token = Secret(sm.token) if sm.token is not None else None
    return SparkStore(name, sm.url.strip(), token, sm.timeout_seconds)


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return the store's token reference, if it has one."""
    assert isinstance(store, SparkStore)
    return [] if store.token is None else [("token", store.token, "password")]


KIND = sql_kind(
    __package__,
    "SparkAdapter",
    SparkStoreModel,
    build=build,
    secrets=store_secrets,
    errors=lazy_error_map("driftgauge.stores.spark.io"),
)
