"""The spark store kind: its config, its view rules and how to open it (client loaded lazily)."""

from __future__ import annotations

from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import StoreError
from driftgauge.stores import registry
from driftgauge.stores.spark.settings import SparkStore, SparkStoreModel, url_shape
from driftgauge.stores.sql.views import DIALECT_CAPABILITIES, sql_view_check


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


def error_map(store: str, what: str, exc: BaseException) -> StoreError | None:
    """Return our exception for a Spark Connect or timeout error; None for a bug."""
    from driftgauge.stores.spark import io

    if not io.driver_error(exc) and not isinstance(exc, StoreError):
        return None
    return io.store_error(store, what, exc)


KIND = registry.StoreKind(
    __package__,
    "SparkAdapter",
    SparkStoreModel,
    build=build,
    check_view=sql_view_check("spark"),
    secrets=store_secrets,
    capabilities=DIALECT_CAPABILITIES,
    errors=error_map,
)
