"""The daily prune in the background: a task the app's lifespan starts and stops."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timedelta

from driftgauge.config.runtime import Config
from driftgauge.core.errors import StateError
from driftgauge.jobs.background import survive
from driftgauge.jobs.schedule import JobSpec
from driftgauge.retention.prune import PruneReport, prune
from driftgauge.state.claims import JobClaims
from driftgauge.state.store import StateStore

log = logging.getLogger("driftgauge.retention")
DAY = 86400.0
# Not at start-up: a replica that restarts often should not prune on every start.
FIRST_AFTER = 600.0


class RetentionJob:
    """Prune the state database once a day; a failed prune is logged and tried next day."""

    def __init__(self, state: StateStore, config: Config, *,
                 clock: Callable[[], datetime], every: float = DAY,
                 first_after: float = FIRST_AFTER, claims: JobClaims | None = None) -> None:
        self._state = state
        self._config = config
        self._clock = clock
        self._every = every
        self._first_after = first_after
        self._claims = claims
        self._task: asyncio.Task[None] | None = None
        self.last: PruneReport | None = None
        """The report of the latest prune this job finished."""

    @property
    def running(self) -> bool:
        """Return True while the background task is alive."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the background task on the running loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="driftgauge-retention")

    async def stop(self) -> None:
        """Cancel the task and wait for it; a prune cut short keeps the batches it committed."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def run_once(self) -> PruneReport | None:
        """Prune now; return the report, or None if the state database failed."""
        with survive("retention", "prune the state database"):
            try:
                self.last = await prune(self._state, self._config, self._clock())
            except StateError as exc:
                log.warning("state prune failed", extra={"error": str(exc)})
                return None
            return self.last
        return None

    async def _loop(self) -> None:
        await asyncio.sleep(self._first_after)
        while True:
            if await self._claim():
                await self.run_once()
            await asyncio.sleep(self._every)

    async def _claim(self) -> bool:
        """Return True if this replica prunes in the current period (one replica a day)."""
        if self._claims is None:
            return True
        spec = JobSpec("retention", "recent", every=timedelta(seconds=self._every))
        fire = spec.latest_fire(self._clock())
        try:
            return fire is None or await self._claims.claim("retention", fire)
        except StateError as exc:
            log.warning("state prune skipped", extra={"error": str(exc)})
            return False
