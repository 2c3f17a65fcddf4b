"""The trino store kind: its config, its view rules and how to open it (client loaded lazily)."""

from __future__ import annotations

from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.stores.sql.views import lazy_error_map, sql_kind
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


KIND = sql_kind(
    __package__,
    "TrinoAdapter",
    TrinoStoreModel,
    build=build,
    secrets=store_secrets,
    errors=lazy_error_map("driftgauge.stores.trino.io"),
)
