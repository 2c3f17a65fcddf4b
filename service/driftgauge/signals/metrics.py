"""Collector part: the vocabulary and volume series of docs/metrics.md, from stored verdicts."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from driftgauge.metrics.stored import StoredPart
from driftgauge.signals.store import SignalsSnapshot


class SignalsMetrics(StoredPart[SignalsSnapshot]):
    """Yield vocabulary and volume families from the latest snapshot; `refresh` reloads it."""

    def families(self, snap: SignalsSnapshot) -> Iterable[Metric]:
        """Return the vocabulary and volume families for one scrape."""
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
