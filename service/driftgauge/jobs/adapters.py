"""The two store adapters of each check, opened once and shared by every run of it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import NamedTuple

from driftgauge import observe
from driftgauge.config.frozen import Check, View
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.pools import StorePools
from driftgauge.stores.preflight import preflight

log = logging.getLogger("driftgauge.runner")


class Adapters(NamedTuple):
    """The two sides of one check."""

    source: StoreAdapter
    reader: StoreAdapter


AdapterSource = Adapters | Callable[[], Awaitable[Adapters]]


Opener = Callable[[View], Awaitable[StoreAdapter]]


class AdapterPool:
    """One adapter per check side, opened on first use and kept until close().

    By default every side on one configured store shares that store's one pool or
    client (StorePools); a given `opener` is used as it is.
    """

    def __init__(self, checks: Mapping[str, Check], opener: Opener | None = None) -> None:
        self._checks = checks
        self.stores = StorePools()
        """The one pool or client per store, for every side and the canary."""
        self._open = opener or self.stores.adapter
        self._sides: dict[str, Adapters] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, check: str) -> Adapters:
        """Return the check's adapters after the schema preflight, opening them if needed.

        Raises StoreError if a side fails, SchemaError if a field cannot be read. The
        preflight runs on every call: an alias or pattern may gain a concrete index with
        another mapping while the adapters stay open.
        """
        pair = await self._opened(check)
        await preflight(self._checks[check], pair.source, pair.reader)
        return pair

    async def _opened(self, check: str) -> Adapters:
        have = self._sides.get(check)
        if have is not None:
            return have
        async with self._locks.setdefault(check, asyncio.Lock()):
            have = self._sides.get(check)
            if have is not None:
                return have
            c = self._checks[check]
            with observe.store_call(c.source.store.name, "open"):
                source = await self._open(c.source)
            try:
                with observe.store_call(c.reader.store.name, "open"):
                    reader = await self._open(c.reader)
            except BaseException:
                await source.close()
                raise
            self._sides[check] = Adapters(source, reader)
            return self._sides[check]

    def getter(self, check: str) -> Callable[[], Awaitable[Adapters]]:
        """Return a zero-argument opener for one check, as run_check accepts."""

        async def get() -> Adapters:
            return await self.get(check)

        return get

    async def close(self) -> None:
        """Close every opened adapter; a failing close does not stop the others."""
        sides, self._sides = self._sides, {}
        for name, pair in sides.items():
            for side in pair:
                try:
                    async with asyncio.timeout(10):
                        await side.close()
                except Exception as exc:
                    log.warning(
                        "closing an adapter failed",
                        extra={"check": name, "error": f"{type(exc).__name__}: {exc}"},
                    )
        await self.stores.close()
