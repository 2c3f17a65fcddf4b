"""The daily prune: what one run does; the job runtime runs it on one replica a day."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from driftgauge.background import survive
from driftgauge.config.runtime import Config
from driftgauge.core.errors import StateError
from driftgauge.retention.prune import PruneReport, prune
from driftgauge.state.store import StateStore

log = logging.getLogger("driftgauge.retention")
DAY = timedelta(days=1)
# Not at start-up: a replica that restarts often should not prune on every start.
FIRST_AFTER = timedelta(minutes=10)


class RetentionJob:
    """Prune the state database; a failed prune is logged and tried at the next period."""

    def __init__(
        self,
        state: StateStore,
        config: Config,
        *,
        clock: Callable[[], datetime],
        every: timedelta = DAY,
        first_after: timedelta = FIRST_AFTER,
    ) -> None:
        self._state = state
        self._config = config
        self._clock = clock
        self.every = every
        """How often the runtime prunes (one replica per period)."""
        self.first_after = first_after
        """How long after start-up the first prune waits."""
        self.last: PruneReport | None = None
        """The report of the latest prune this job finished."""

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
