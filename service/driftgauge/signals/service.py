"""Measure each check's vocabulary and volume on the check's recent schedule."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from driftgauge.config.runtime import Check, Volume
from driftgauge.core.errors import DriftgaugeError, UnknownCheck
from driftgauge.jobs.background import survive
from driftgauge.jobs.clock import EPOCH, utc_now
from driftgauge.jobs.schedule import JobSpec
from driftgauge.signals.run import SignalsResult, evaluate_signals
from driftgauge.signals.store import SignalsStore
from driftgauge.state.claims import JobClaims
from driftgauge.stores.base import StoreAdapter

log = logging.getLogger("driftgauge.signals")
SourceGetter = Callable[[Check], Awaitable[StoreAdapter]]


def recent_start(check: Check, now: datetime) -> datetime:
    """Return the first instant of the check's recent window (its first local day)."""
    today = now.astimezone(check.timezone).date()
    first = today - timedelta(days=max(check.schedule.recent_days, 1) - 1)
    return datetime(first.year, first.month, first.day, tzinfo=check.timezone)


class SignalsService:
    """Own the vocabulary/volume schedule; `run(check)` measures one check now."""

    def __init__(self, checks: Mapping[str, Check], store: SignalsStore, source: SourceGetter,
                 *, clock: Callable[[], datetime] = utc_now,
                 claims: JobClaims | None = None) -> None:
        self._checks = {n: c for n, c in checks.items()
                        if c.vocabulary or c.volume is not None}
        self._claims = claims
        self.store = store
        self._source = source
        self._clock = clock
        self._aps: AsyncIOScheduler | None = None

    @property
    def checks(self) -> list[str]:
        """Return the names of the checks with vocabulary or volume settings."""
        return sorted(self._checks)

    def volume_settings(self, name: str) -> Volume | None:
        """Return the check's volume settings, or None if it has none (or is unknown)."""
        check = self._checks.get(name)
        return check.volume if check is not None else None

    def start(self) -> None:
        """Measure every such check on its recent interval (default hourly)."""
        aps = AsyncIOScheduler(timezone=UTC)
        for name, check in sorted(self._checks.items()):
            every = check.schedule.recent_every or timedelta(hours=1)
            aps.add_job(self._fire, trigger=IntervalTrigger(seconds=every.total_seconds(),
                                                            start_date=EPOCH, timezone=UTC),
                        args=[name], id=f"{name}:signals", max_instances=1, coalesce=True,
                        misfire_grace_time=max(1, int(every.total_seconds() / 2)),
                        replace_existing=True)
        aps.start()
        self._aps = aps

    def stop(self) -> None:
        """Stop measuring."""
        if self._aps is not None and self._aps.running:
            self._aps.shutdown(wait=False)
        self._aps = None

    async def run(self, name: str) -> SignalsResult:
        """Measure one check's recent window now and record it."""
        check = self._checks.get(name)
        if check is None:
            raise UnknownCheck(f"no check named {name!r} has vocabulary or volume settings")
        now = self._clock()
        return await evaluate_signals(check, await self._source(check), self.store,
                                      recent_start(check, now), now, now=now)

    async def claim(self, name: str) -> bool:
        """Return True if this replica takes the measurement's current scheduled time."""
        if self._claims is None:
            return True
        every = self._checks[name].schedule.recent_every or timedelta(hours=1)
        fire = JobSpec(name, "recent", every=every).latest_fire(self._clock())
        if fire is None or await self._claims.claim(f"signals:{name}", fire):
            return True
        log.info("vocabulary/volume skipped: another replica measures it",
                 extra={"check": name, "scheduled_for": fire.isoformat()})
        return False

    async def _fire(self, name: str) -> None:
        with survive("signals", name, check=name):
            try:
                if not await self.claim(name):
                    return
                found = await self.run(name)
            except DriftgaugeError as exc:
                log.warning("vocabulary/volume measurement failed", extra={"check": name,
                                                                           "error": str(exc)})
                return
            log.info("vocabulary/volume measured", extra={
                "check": name, "unmatched_rows": sum(v.unmatched_rows for v in found.vocabulary),
                "volume_anomalies": sum(1 for d in found.volume if d.anomaly)})
