"""The trino store kind: its config, its view rules and how to open it (client loaded lazily)."""

from __future__ import annotations

from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import StoreError
from driftgauge.stores import registry
from driftgauge.stores.sql.views import DIALECT_CAPABILITIES, sql_view_check
from driftgauge.stores.trino.settings import TrinoStore, TrinoStoreModel, url_shape


def build(name: str, sm: TrinoStoreModel, problems: list[str]) -> TrinoStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    if problem := url_shape(sm.url):
        problems.append(f"stores.{name}.url: {problem}")
    elif sm.password is not None and not sm.url.strip().startswith("https://"):
        # The client refuses basic auth over plain HTTP: say so before the first run does.
        problems.append(f"stores.{name}.password: needs an https:// url (basic auth over TLS)")
    return TrinoStore(
        name,
        sm.url.strip().rstrip("/"),
        catalog=sm.catalog,
        schema=sm.schema_,
        user=sm.user,
        password=Secret(sm.password) if sm.password is not None else None,
        token=Secret(sm.token) if sm.token is not None else None,
        verify=sm.verify,
        timeout=sm.timeout_seconds,
    )


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return the store's password or token reference, if it has one."""
    assert isinstance(store, TrinoStore)
    out = []
    if store.password is not None:
        out.append(("password", store.password, "password"))
    if store.token is not None:
        out.append(("token", store.token, "password"))
    return out


def error_map(store: str, what: str, exc: BaseException) -> StoreError | None:
    """Return our exception for a Trino client or timeout error; None for a bug."""
    from driftgauge.stores.trino import io

    if not io.driver_error(exc) and not isinstance(exc, StoreError):
        return None
    return io.store_error(store, what, exc)


KIND = registry.StoreKind(
    __package__,
    "TrinoAdapter",
    TrinoStoreModel,
    build=build,
    check_view=sql_view_check("trino"),
    secrets=store_secrets,
    capabilities=DIALECT_CAPABILITIES,
    errors=error_map,
)
