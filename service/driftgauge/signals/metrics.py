"""Collector part: the vocabulary and volume series of docs/metrics.md, from stored verdicts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from driftgauge.signals.store import SignalsSnapshot, SignalsStore


class SignalsMetrics:
    """Yield vocabulary and volume families from the latest snapshot; `refresh` reloads it."""

    def __init__(self, store: SignalsStore, checks: Sequence[str]) -> None:
        self._store = store
        self._checks = sorted(checks)
        self._snap: SignalsSnapshot | None = None

    async def refresh(self) -> None:
        """Reload the snapshot from the state database (raises StateError on failure)."""
        self._snap = await self._store.snapshot(self._checks)

    def __call__(self) -> Iterable[Metric]:
        """Return the vocabulary and volume families for one scrape."""
        snap = self._snap
        if snap is None:
            return []
        values = GaugeMetricFamily("driftgauge_vocabulary_unmatched_values",
                                   "Distinct source values the reader's filter cannot match.",
                                   labels=["check", "field"])
        rows = GaugeMetricFamily("driftgauge_vocabulary_unmatched_rows",
                                 "Source rows carrying such values.", labels=["check", "field"])
        anomaly = GaugeMetricFamily(
            "driftgauge_volume_anomaly",
            "1 if the bucket's distinct-key count is outside the trailing mean ± k sd.",
            labels=["check", "day"])
        for (check, field), (n_values, n_rows) in sorted(snap.vocabulary.items()):
            values.add_metric([check, field], n_values)
            rows.add_metric([check, field], n_rows)
        for (check, day), bad in sorted(snap.volume.items()):
            anomaly.add_metric([check, day.isoformat()], 1.0 if bad else 0.0)
        return [values, rows, anomaly]
