"""Measure a check's vocabulary and volume (the job runtime runs it on the recent interval)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta

from driftgauge.config.runtime import Check, Volume
from driftgauge.core.clock import utc_now
from driftgauge.core.errors import DriftgaugeError
from driftgauge.served import FeatureService, ServedChecks
from driftgauge.signals.run import SignalsResult, evaluate_signals
from driftgauge.signals.store import SignalsStore
from driftgauge.stores.base import StoreAdapter

log = logging.getLogger("driftgauge.signals")
SourceGetter = Callable[[Check], Awaitable[StoreAdapter]]


def recent_start(check: Check, now: datetime) -> datetime:
    """Return the first instant of the check's recent window (its first local day)."""
    today = now.astimezone(check.timezone).date()
    first = today - timedelta(days=max(check.schedule.recent_days, 1) - 1)
    return datetime(first.year, first.month, first.day, tzinfo=check.timezone)


class SignalsService(FeatureService[SignalsStore, StoreAdapter]):
    """Measure vocabulary and volume; the job runtime schedules it, `run(check)` measures now."""

    def __init__(
        self,
        checks: Mapping[str, Check],
        store: SignalsStore,
        source: SourceGetter,
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        served = ServedChecks(
            checks,
            lambda c: bool(c.vocabulary) or c.volume is not None,
            "vocabulary or volume settings",
        )
        super().__init__(served, store, source, clock)

    def volume_settings(self, name: str) -> Volume | None:
        """Return the check's volume settings, or None if it has none (or is unknown)."""
        check = self._checks.find(name)
        return check.volume if check is not None else None

    async def run(self, name: str) -> SignalsResult:
        """Measure one check's recent window now and record it."""
        check = self._checks.get(name)
        now = self._clock()
        return await evaluate_signals(
            check, await self._source(check), self.store, recent_start(check, now), now, now=now
        )

    async def scheduled(self, name: str) -> None:
        """Measure one check for its schedule; a store or state failure is logged."""
        try:
            found = await self.run(name)
        except DriftgaugeError as exc:
            log.warning(
                "vocabulary/volume measurement failed", extra={"check": name, "error": str(exc)}
            )
            return
        log.info(
            "vocabulary/volume measured",
            extra={
                "check": name,
                "unmatched_rows": sum(v.unmatched_rows for v in found.vocabulary),
                "volume_anomalies": sum(1 for d in found.volume if d.anomaly),
            },
        )
