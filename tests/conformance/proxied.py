"""Adapters reached through a fault proxy: the kinds' `open_hung`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

from driftgauge.stores.base import StoreAdapter
from tests.faults.proxy import TcpFaultProxy


class FaultProxy(Protocol):
    """A proxy of tests/faults/proxy.py: started before use, stopped to drop its connections."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


P = TypeVar("P", bound=FaultProxy)


class ProxiedHung:
    """An adapter behind a fault proxy that `hold` makes stop answering."""

    def __init__(self, adapter: StoreAdapter, proxy: FaultProxy, hold: Callable[[], None]) -> None:
        self.adapter = adapter
        self.proxy = proxy
        self.hold = hold

    def hang(self) -> None:
        """Answer nothing from now on."""
        self.hold()

    async def close(self) -> None:
        """Drop the proxied connections, then close the adapter."""
        try:
            await self.proxy.stop()
        finally:
            await self.adapter.close()


async def open_behind(
    proxy: P, opener: Callable[[P], Awaitable[StoreAdapter]], hold: Callable[[P], None]
) -> ProxiedHung:
    """Start `proxy` and return the adapter `opener` opens through it (stopping it on failure)."""
    await proxy.start()
    try:
        return ProxiedHung(await opener(proxy), proxy, lambda: hold(proxy))
    except BaseException:
        await proxy.stop()
        raise


async def open_proxied(
    dsn: str, default_port: int, opener: Callable[[str], Awaitable[StoreAdapter]]
) -> ProxiedHung:
    """Return what `opener` opens on `dsn` re-pointed at a TCP proxy that can hold every byte."""
    parts = urlsplit(dsn)
    proxy = TcpFaultProxy((parts.hostname or "127.0.0.1", parts.port or default_port))

    async def through(started: TcpFaultProxy) -> StoreAdapter:
        netloc = f"{parts.username}@127.0.0.1:{started.port}"
        return await opener(parts._replace(netloc=netloc).geturl())

    return await open_behind(proxy, through, lambda started: started.set_mode("hang"))
