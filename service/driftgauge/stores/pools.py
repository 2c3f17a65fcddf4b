"""One connection pool or client per configured store, shared by every check and side using it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from driftgauge.config.frozen import Store, View
from driftgauge.stores import registry
from driftgauge.stores.base import StoreAdapter

log = logging.getLogger("driftgauge.stores")


class StorePools:
    """Open each store's connection on first use and keep it until close()."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[Store, Any]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def connection(self, store: Store) -> Any:
        """Return the store's shared pool or client, opening it if needed."""
        have = self._open.get(store.name)
        if have is None:
            async with self._locks.setdefault(store.name, asyncio.Lock()):
                have = self._open.get(store.name)
                if have is None:
                    have = (store, await registry.kind_of(store.kind).connect(store))
                    self._open[store.name] = have
        if have[0] != store:
            raise ValueError(f"store {store.name!r} is configured twice, differently")
        return have[1]

    async def adapter(self, view: View) -> StoreAdapter:
        """Return an adapter for the view on its store's shared connection."""
        kind = registry.kind_of(view.kind)
        return await kind.open(view, await self.connection(view.store))

    async def close(self) -> None:
        """Close every opened connection; a failing close does not stop the others."""
        opened, self._open = self._open, {}
        for name, (store, handle) in opened.items():
            try:
                async with asyncio.timeout(10):
                    await registry.kind_of(store.kind).disconnect(handle)
            except Exception as exc:
                log.warning(
                    "closing a store connection failed",
                    extra={"store": name, "error": f"{type(exc).__name__}: {exc}"},
                )
