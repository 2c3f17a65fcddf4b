"""Per-store query slots: at most K queries at once on a store, first come first served.

A source database is shared by many checks; `stores.NAME.max_concurrent_queries` caps
what one replica asks of it at once. The slots live per event loop (a semaphore belongs
to one loop) and per store name; a store without a limit takes no slot.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from driftgauge import observe

_SLOTS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]
] = weakref.WeakKeyDictionary()


def _semaphore(store: str, limit: int) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    per_loop = _SLOTS.setdefault(loop, {})
    sem = per_loop.get((store, limit))
    if sem is None:
        sem = per_loop[(store, limit)] = asyncio.Semaphore(limit)
    return sem


@asynccontextmanager
async def store_slot(store: str, limit: int | None) -> AsyncIterator[None]:
    """Hold one of the store's `limit` query slots for the block (none when unlimited).

    asyncio.Semaphore wakes waiters in the order they came, so a check that queues
    behind others is served in turn, not starved; the wait is observed for /metrics.
    """
    if limit is None:
        yield
        return
    sem = _semaphore(store, limit)
    t0 = time.perf_counter()
    observe.SLOT_WAITING.add((store,), 1)
    try:
        await sem.acquire()
    finally:
        observe.SLOT_WAITING.add((store,), -1)
    observe.SLOT_WAITS.observe((store,), time.perf_counter() - t0)
    try:
        yield
    finally:
        sem.release()
