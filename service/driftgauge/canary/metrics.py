"""Collector part: the canary series of docs/metrics.md, from stored attempts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from driftgauge.canary.probe import RESULTS
from driftgauge.canary.store import CanarySnapshot, CanaryStore


class CanaryMetrics:
    """Yield canary metric families from the latest snapshot; `refresh` reloads it.

    A failed refresh keeps the previous snapshot rather than publishing zeros.
    """

    def __init__(self, store: CanaryStore, checks: Sequence[str]) -> None:
        self._store = store
        self._checks = sorted(checks)
        self._snap: CanarySnapshot | None = None

    async def refresh(self) -> None:
        """Reload the snapshot from the state database (raises StateError on failure)."""
        self._snap = await self._store.snapshot(self._checks)

    def __call__(self) -> Iterable[Metric]:
        """Return the canary families for one scrape."""
        snap = self._snap
        if snap is None:
            return []
        up = GaugeMetricFamily("driftgauge_canary_up",
                               "1 if the latest canary write/read-back succeeded.",
                               labels=["check"])
        duration = GaugeMetricFamily("driftgauge_canary_duration_seconds",
                                     "Duration of the latest canary.", labels=["check"])
        last = GaugeMetricFamily("driftgauge_canary_last_success_timestamp_seconds",
                                 "When a canary last succeeded.", labels=["check"])
        runs = CounterMetricFamily("driftgauge_canary_runs", "Canary attempts by result.",
                                   labels=["check", "result"])
        for check in self._checks:
            latest = snap.latest.get(check)
            if latest is not None:
                up.add_metric([check], 1.0 if latest.ok else 0.0)
                duration.add_metric([check], latest.duration)
            if check in snap.last_success:
                last.add_metric([check], snap.last_success[check].timestamp())
            for result in RESULTS:
                runs.add_metric([check, result], snap.runs.get((check, result), 0))
        return [up, duration, last, runs]
