"""The reader_api store kind: an application's HTTP API as a reader view (client lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.stores import registry
from driftgauge.stores.reader_api.settings import BOUNDS, ReaderApiStore, ReaderApiStoreModel


def build(name: str, sm: ReaderApiStoreModel, problems: list[str]) -> ReaderApiStore:
    """Return the runtime store of a validated `stores.NAME` entry."""
    if not sm.url.startswith(("http://", "https://")):
        problems.append(f"stores.{name}.url: must start with http:// or https://")
    text = sm.url + "".join(sm.params.values())
    for bound in BOUNDS:
        if bound not in text:
            problems.append(
                f"stores.{name}.url: {bound} appears neither in url nor in "
                "params; the API must be asked for one bucket's rows"
            )
    auth, pages = sm.auth, sm.pagination
    return ReaderApiStore(
        name=name,
        url=sm.url,
        params=tuple(sm.params.items()),
        bearer=None if auth is None or auth.bearer is None else Secret(auth.bearer),
        username=None if auth is None else auth.username,
        password=None if auth is None or auth.password is None else Secret(auth.password),
        rows_path=sm.rows_path,
        paging=pages.style,
        cursor_path=pages.cursor_path,
        cursor_param=pages.cursor_param,
        page_param=pages.page_param,
        first_page=pages.first_page,
        offset_param=pages.offset_param,
        size_param=pages.size_param,
        page_size=sm.page_size,
        rate_limit=sm.rate_limit,
        max_rows=sm.max_rows,
        max_window_days=sm.max_window_days,
        timeout=sm.timeout_seconds,
        verify_certs=sm.verify_certs,
    )


def check_view(where: str, vm: Any, exclusions: Sequence[Any], problems: list[str]) -> None:
    """Append what a reader_api view gets wrong: its rows come from the store's endpoint."""
    why = (
        "a reader_api view reads the store's url; key, time and fields are JSON paths inside a row"
    )
    registry.refuse_keys(where, vm, ("query", "table", "index", "filter"), why, problems)
    if exclusions:
        problems.append(
            f"{where.rsplit('.', 1)[0]}.exclusions: a reader_api view cannot "
            "exclude rows (it is read as the reader sees it)"
        )


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return the bearer token or basic-auth password reference, if any."""
    assert isinstance(store, ReaderApiStore)
    out: list[tuple[str, Secret, str]] = []
    if store.bearer is not None:
        out.append(("auth.bearer", store.bearer, "token"))
    if store.password is not None:
        out.append(("auth.password", store.password, "password"))
    return out


def coverage(store: Store) -> str:
    """Return the bounded recent window a check on this API reads."""
    assert isinstance(store, ReaderApiStore)
    return store.mode


KIND = registry.StoreKind(
    __package__,
    "ReaderApiAdapter",
    ReaderApiStoreModel,
    build=build,
    check_view=check_view,
    secrets=store_secrets,
    capabilities=frozenset(
        {registry.COMPOSITE_KEYS, registry.MEASURE_TOTALS, registry.SLOT_FIRST_PASS}
    ),
    coverage=coverage,
)
