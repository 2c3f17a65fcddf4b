"""How a pooled SQL kind opens its stores: its io module owns the pool, its adapter reads.

The kind's modules are imported on first use, so a configuration that does not name the
kind never loads its driver.
"""

from __future__ import annotations

import importlib
from typing import Any

from driftgauge.config.runtime import Store, View
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.registry import Connect, Disconnect, Open


def pool_hooks(
    package: str, store_type: type[Any], adapter: str
) -> tuple[Connect, Disconnect, Open]:
    """Return connect, disconnect and open for the kind in `package` (`io` and `adapter`)."""

    async def connect(store: Store) -> Any:
        """Return the pool every view of the store shares."""
        assert isinstance(store, store_type)
        return await importlib.import_module(f"{package}.io").store_pool(store)

    async def disconnect(pool: Any) -> None:
        """Close a pool opened by connect."""
        await importlib.import_module(f"{package}.io").close_pool(pool)

    async def open_adapter(view: View, pool: Any) -> StoreAdapter:
        """Return an adapter on the shared pool, or on its own pool when None."""
        opened: StoreAdapter = await getattr(
            importlib.import_module(f"{package}.adapter"), adapter
        ).open(view, pool)
        return opened

    return connect, disconnect, open_adapter
