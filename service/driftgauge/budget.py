"""The run's deadline, visible to the store layer so that retries end inside it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("driftgauge_run_deadline", default=None)
"""Event-loop time at which the current run must end, or None when it has no deadline."""


@asynccontextmanager
async def run_timeout(seconds: float | None) -> AsyncIterator[None]:
    """Bound the block by `seconds` (None: unbounded), as asyncio.timeout, and publish it."""
    now = asyncio.get_running_loop().time()
    outer = _DEADLINE.get()
    mine = None if seconds is None else now + seconds
    if outer is not None and (mine is None or outer < mine):
        mine = outer
    token = _DEADLINE.set(mine)
    try:
        async with asyncio.timeout(seconds):
            yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Return the seconds left before the current run's deadline, or None without one."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    return deadline - asyncio.get_running_loop().time()
