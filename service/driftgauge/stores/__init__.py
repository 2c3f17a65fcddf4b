"""Store adapters: one subpackage per store kind behind one Protocol (see stores.registry)."""

from __future__ import annotations

from typing import Any

from driftgauge.config.frozen import View
from driftgauge.stores.base import StoreAdapter


async def open_adapter(view: View, connection: Any = None) -> StoreAdapter:
    """Return an open adapter for a view's store kind.

    With `connection` (the store's pool or client from StorePools) the adapter shares it;
    without, the adapter opens its own and closes it on close().
    """
    from driftgauge.stores import registry

    return await registry.kind_of(view.kind).open(view, connection)
