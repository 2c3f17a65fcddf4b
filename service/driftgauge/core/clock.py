"""The one clock of the service: what time it is, and waiting until a time comes.

Recurring jobs fire on grids anchored at `EPOCH`, so every replica fires the same
scheduled time and the state database can let exactly one of them run it. Tests hand the
runtime a `ManualClock` and move time themselves instead of sleeping.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
"""The resolution of event times: [t, t + MICROSECOND) holds exactly the rows at t."""


def utc_now() -> datetime:
    """Return the current time, aware, in UTC."""
    return datetime.now(UTC)


@runtime_checkable
class Clock(Protocol):
    """A source of aware UTC times that can also wait until one of them comes."""

    def __call__(self) -> datetime:
        """Return the current time."""

    async def sleep_until(self, when: datetime) -> None:
        """Return once the clock reads `when` or later."""


class SystemClock:
    """The wall clock."""

    def __call__(self) -> datetime:
        """Return the current time, aware, in UTC."""
        return utc_now()

    async def sleep_until(self, when: datetime) -> None:
        """Sleep until the wall clock reaches `when`."""
        await asyncio.sleep(max(0.0, (when - utc_now()).total_seconds()))


class ManualClock:
    """A clock that moves only when told to; `sleep_until` returns once it got there."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._moved = asyncio.Condition()

    def __call__(self) -> datetime:
        """Return the time the clock was last set to."""
        return self._now

    async def sleep_until(self, when: datetime) -> None:
        """Wait until the clock is moved to `when` or past it."""
        async with self._moved:
            await self._moved.wait_for(lambda: self._now >= when)

    async def advance(self, by: timedelta) -> None:
        """Move the clock forward by `by` and wake whatever waits for that time."""
        await self.set(self._now + by)

    async def set(self, to: datetime) -> None:
        """Set the clock (forward or back) and wake the waiters."""
        async with self._moved:
            self._now = to
            self._moved.notify_all()
