"""Measure a check's vocabulary and volume (the job runtime runs it on the recent interval)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from driftgauge.config.frozen import Check, Volume
from driftgauge.core.errors import DriftgaugeError
from driftgauge.served import FeatureService
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


@dataclass(eq=False)
class SignalsService(FeatureService[SignalsStore, StoreAdapter]):
    """Measure vocabulary and volume; the job runtime schedules it, `run(check)` measures now."""

    what = "vocabulary or volume settings"

    @staticmethod
    def serves(check: Check) -> bool:
        """Return whether the check measures its vocabulary or volume."""
        return bool(check.vocabulary) or check.volume is not None

    def volume_settings(self, name: str) -> Volume | None:
        """Return the check's volume settings, or None if it has none (or is unknown)."""
        check = self._checks.find(name)
        return check.volume if check is not None else None

    async def run(self, name: str) -> SignalsResult:
        """Measure one check's recent window now and record it."""
        check = self._checks.get(name)
        now = self.clock()
        return await evaluate_signals(
            check, await self.source(check), self.store, recent_start(check, now), now, now=now
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
