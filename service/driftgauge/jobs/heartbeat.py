"""Keep this replica's runs owned and expire the runs of replicas that died mid-run."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from driftgauge.config.frozen import Lease
from driftgauge.core.errors import StateError
from driftgauge.state.store import StateStore

log = logging.getLogger("driftgauge.heartbeat")
Listener = Callable[[str], Awaitable[None]]


class LeaseKeeper:
    """Renew this process's runs and expire others' runs past their lease, once a heartbeat.

    Any replica expires any run, so a dead replica's run is marked `error: interrupted`
    within one lease plus one heartbeat by a survivor, or by the next start.
    """

    def __init__(self, state: StateStore, lease: Lease, on_expired: Listener | None = None) -> None:
        self._state = state
        self._lease = lease
        self._on_expired = on_expired

    @property
    def every(self) -> timedelta:
        """Return how often the runtime beats (the lease's heartbeat)."""
        return self._lease.heartbeat

    async def beat(self) -> None:
        """Renew this process's runs once; log runs another replica already expired."""
        owned = set(self._state.owned)
        alive = await self._state.leases.renew(owned)
        # A run missing here lost its lease (e.g. this replica could not reach the
        # database for longer than the lease): its result will be refused when recorded.
        lost = owned - alive
        if lost and (lost & self._state.owned):
            log.warning("runs lost their lease", extra={"runs": sorted(lost)})

    async def expire(self) -> list[tuple[int, str]]:
        """Mark runs past their lease as interrupted once; return (run id, check) of each."""
        gone = await self._state.leases.expire(self._lease.expires)
        if gone:
            log.warning(
                "marked interrupted runs as failed",
                extra={
                    "runs": [run for run, _ in gone],
                    "checks": sorted({check for _, check in gone}),
                },
            )
            if self._on_expired is not None:
                for check in sorted({check for _, check in gone}):
                    await self._on_expired(check)
        return gone

    async def tick(self, _: object = None) -> None:
        """Renew, then expire, once; a state-database outage is logged (the next beat retries)."""
        try:
            await self.beat()
            await self.expire()
        except StateError as exc:
            log.warning("heartbeat failed: state database", extra={"error": str(exc)})
