"""Collector part: the vocabulary and volume series of docs/metrics.md, from stored verdicts."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from driftgauge.metrics.families import Spec, build
from driftgauge.metrics.stored import StoredPart
from driftgauge.signals.store import SignalsSnapshot
from driftgauge.signals.volume import VOLUME_STATUSES

SIGNALS = {
    "values": Spec(
        "driftgauge_vocabulary_unmatched_values",
        "Distinct source values the reader's filter cannot match.",
        ("check", "field"),
    ),
    "rows": Spec(
        "driftgauge_vocabulary_unmatched_rows",
        "Source rows carrying such values.",
        ("check", "field"),
    ),
    "anomaly": Spec(
        "driftgauge_volume_anomaly",
        "1 if the bucket's distinct-key count is outside the trailing mean ± k sd "
        "(absent while the bucket has too little history to judge).",
        ("check", "day"),
    ),
    "status": Spec(
        "driftgauge_volume_status",
        "1 for the bucket's volume verdict, 0 otherwise.",
        ("check", "day", "status"),
    ),
    "history": Spec(
        "driftgauge_volume_history_buckets",
        "Trailing day buckets of source history the band was built from.",
        ("check", "day"),
    ),
}
"""The vocabulary and volume families, in the order a scrape prints them."""


class SignalsMetrics(StoredPart[SignalsSnapshot]):
    """Yield vocabulary and volume families from the latest snapshot; `refresh` reloads it."""

    def families(self, snap: SignalsSnapshot) -> Iterable[Metric]:
        """Return the vocabulary and volume families for one scrape."""
        f = build(SIGNALS)
        for (check, field), (n_values, n_rows) in sorted(snap.vocabulary.items()):
            f["values"].add_metric([check, field], n_values)
            f["rows"].add_metric([check, field], n_rows)
        for (check, day), (verdict, days) in sorted(snap.volume.items()):
            labels = [check, day.isoformat()]
            # Too little history is no verdict: a 0 here would read as a judged, normal day.
            if verdict != "insufficient_history":
                f["anomaly"].add_metric(labels, 1.0 if verdict == "anomaly" else 0.0)
            for name in VOLUME_STATUSES:
                f["status"].add_metric([*labels, name], 1.0 if verdict == name else 0.0)
            if days is not None:
                f["history"].add_metric(labels, days)
        return list(f.values())
