"""Calls of a blocking driver in a store's own threads, stopped when they outlive the timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
WORKERS = 4
"""Calls of one store running at once; more wait for a thread (within their timeout)."""


def store_threads(kind: str, store: str) -> ThreadPoolExecutor:
    """Return the threads one store's calls run in, named after the kind and the store."""
    return ThreadPoolExecutor(WORKERS, thread_name_prefix=f"{kind}-{store}")


async def in_thread(
    pool: ThreadPoolExecutor, work: Callable[[], T], seconds: float, stop: Callable[[], Any] | None
) -> T:
    """Run `work` in a thread of `pool`; past `seconds` (or cancelled), `stop` what it runs.

    Without `stop` nothing can be stopped, so nothing is waited for either.
    """
    future = asyncio.get_running_loop().run_in_executor(pool, work)
    try:
        return await asyncio.wait_for(asyncio.shield(future), seconds)
    except BaseException:
        if not future.done() and stop is not None:
            # The stop is a blocking call too; a server that does not answer is given 5 s.
            halt = asyncio.ensure_future(asyncio.to_thread(stop))
            await asyncio.wait([halt], timeout=5)
            # The stopped work ends promptly; wait so no thread outlives the call.
            await asyncio.wait([future], timeout=5)
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: the stop is the error we raise
        raise


class Closable(Protocol):
    """A store's handle whose close() ends its session and threads."""

    async def close(self) -> None:
        """Close the handle."""
        ...


async def close_pool(handle: Closable) -> None:
    """Close a handle opened by the kind's store_pool."""
    await handle.close()
