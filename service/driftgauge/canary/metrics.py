"""Collector part: the canary series of docs/metrics.md, from stored attempts."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from driftgauge.canary.probe import RESULTS
from driftgauge.canary.store import CanarySnapshot
from driftgauge.metrics.families import Spec, build
from driftgauge.metrics.stored import StoredPart

CANARY = {
    "up": Spec(
        "driftgauge_canary_up", "1 if the latest canary write/read-back succeeded.", ("check",)
    ),
    "duration": Spec(
        "driftgauge_canary_duration_seconds", "Duration of the latest canary.", ("check",)
    ),
    "last": Spec(
        "driftgauge_canary_last_success_timestamp_seconds",
        "When a canary last succeeded.",
        ("check",),
    ),
    "runs": Spec(
        "driftgauge_canary_runs", "Canary attempts by result.", ("check", "result"), "counter"
    ),
}
"""The canary families, in the order a scrape prints them."""


class CanaryMetrics(StoredPart[CanarySnapshot]):
    """Yield canary metric families from the latest snapshot; `refresh` reloads it.

    A failed refresh keeps the previous snapshot rather than publishing zeros.
    """

    def families(self, snap: CanarySnapshot) -> Iterable[Metric]:
        """Return the canary families for one scrape."""
        f = build(CANARY)
        for check in self._names:
            latest = snap.latest.get(check)
            if latest is not None:
                f["up"].add_metric([check], 1.0 if latest.ok else 0.0)
                f["duration"].add_metric([check], latest.duration)
            if check in snap.last_success:
                f["last"].add_metric([check], snap.last_success[check].timestamp())
            for result in RESULTS:
                f["runs"].add_metric([check, result], snap.runs.get((check, result), 0))
        return list(f.values())
