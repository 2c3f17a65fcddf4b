"""The daily prune: what one run does; the job runtime runs it on one replica a day."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta

from driftgauge.background import survive
from driftgauge.config.frozen import Config
from driftgauge.core.errors import StateError
from driftgauge.retention.prune import PruneReport, prune
from driftgauge.state.store import StateStore

log = logging.getLogger("driftgauge.retention")
DAY = timedelta(days=1)
# Not at start-up: a replica that restarts often should not prune on every start.
FIRST_AFTER = timedelta(minutes=10)


@dataclass(eq=False)
class RetentionJob:
    """Prune the state database; a failed prune is logged and tried at the next period."""

    state: StateStore
    config: Config
    _: KW_ONLY
    clock: Callable[[], datetime]
    every: timedelta = DAY
    """How often the runtime prunes (one replica per period)."""
    first_after: timedelta = FIRST_AFTER
    """How long after start-up the first prune waits."""
    last: PruneReport | None = field(default=None, init=False)
    """The report of the latest prune this job finished."""

    async def run_once(self) -> PruneReport | None:
        """Prune now; return the report, or None if the state database failed."""
        with survive("retention", "prune the state database"):
            try:
                self.last = await prune(self.state, self.config, self.clock())
            except StateError as exc:
                log.warning("state prune failed", extra={"error": str(exc)})
                return None
            return self.last
        return None
