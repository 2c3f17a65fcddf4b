"""The mariadb store kind (MariaDB or MySQL): its config, view rules and how to open it."""

from __future__ import annotations

from driftgauge.config import secrets
from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import StoreError
from driftgauge.stores.mariadb.settings import MariaDBStore, MariaDBStoreModel, dsn_shape
from driftgauge.stores.sql.views import sql_kind


def build(name: str, sm: MariaDBStoreModel, problems: list[str]) -> MariaDBStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    if not secrets.is_reference(sm.dsn) and (problem := dsn_shape(sm.dsn)):
        problems.append(f"stores.{name}.dsn: {problem}")
    return MariaDBStore(name, Secret(sm.dsn), sm.timeout_seconds, sm.pool_max)


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return the store's DSN reference (its shape is checked when the pool opens)."""
    assert isinstance(store, MariaDBStore)
    # "password", not "dsn": the resolver's DSN check knows only postgresql:// URLs.
    return [("dsn", store.dsn, "password")]


def error_map(store: str, what: str, exc: BaseException) -> StoreError | None:
    """Return our exception for an aiomysql, PyMySQL or socket error; None for a bug."""
    import pymysql

    from driftgauge.stores.mariadb import io

    if not isinstance(exc, StoreError | TimeoutError | OSError | pymysql.MySQLError):
        return None
    return io.translate_error(store, what, exc)


KIND = sql_kind(
    __package__,
    "MariaDBAdapter",
    MariaDBStoreModel,
    build=build,
    secrets=store_secrets,
    errors=error_map,
)
