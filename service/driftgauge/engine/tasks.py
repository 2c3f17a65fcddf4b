"""Concurrent store calls that all end with the call that started them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def all_or_none(*calls: Awaitable[T]) -> list[T]:
    """Return every call's result; when one fails, cancel the rest and wait for them.

    asyncio.gather lets the others run on after the first failure: a failed run's store
    calls would go on against adapters that are closed or already serve the next run.
    """
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
