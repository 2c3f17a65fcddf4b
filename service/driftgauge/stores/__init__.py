"""Store adapters: one per store kind behind one Protocol, found through a registry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from driftgauge.config.runtime import StoreKind, View
from driftgauge.stores.base import StoreAdapter

Opener = Callable[[View], Awaitable[StoreAdapter]]


async def _open_postgres(view: View) -> StoreAdapter:
    from driftgauge.stores.postgres.adapter import PostgresAdapter

    return await PostgresAdapter.open(view)


async def _open_opensearch(view: View) -> StoreAdapter:
    from driftgauge.stores.opensearch.adapter import OpenSearchAdapter

    return await OpenSearchAdapter.open(view)


ADAPTERS: dict[StoreKind, Opener] = {
    "postgres": _open_postgres,
    "opensearch": _open_opensearch,
}
"""Store kind → opener; each opener imports its adapter module, and so its driver, lazily."""


async def open_adapter(view: View) -> StoreAdapter:
    """Return an open adapter for a view's store kind."""
    try:
        opener = ADAPTERS[view.kind]
    except KeyError:
        raise ValueError(f"no adapter for store kind {view.kind!r}") from None
    return await opener(view)
