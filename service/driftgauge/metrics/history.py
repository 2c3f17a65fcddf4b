"""Collector part: the days before the recent window, as the full-history pass last judged them.

Per-bucket series stop at the recent window, so what the full pass finds in older days (a
source TTL, updates lost long ago) would never page. These families keep it visible with
bounded cardinality: sums and counts per check, never a series per day.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import Metric

from driftgauge.engine.result import DRIFT_KINDS
from driftgauge.metrics.collector import ROW_KINDS, CollectorPart, bucket_rows
from driftgauge.metrics.families import Spec, build
from driftgauge.metrics.snapshot import CheckSnapshot

HISTORY = {
    "rows": Spec(
        "driftgauge_history_rows",
        "Row counts summed over the full-history days before the recent window "
        "(settling buckets excluded).",
        ("check", "kind"),
    ),
    "in_drift": Spec(
        "driftgauge_history_buckets_in_drift",
        "Days before the recent window in drift with rows in that direction.",
        ("check", "direction"),
    ),
    "oldest": Spec(
        "driftgauge_history_oldest_drift_day_timestamp_seconds",
        "Start of the oldest day before the recent window in drift in that direction.",
        ("check", "direction"),
    ),
}
"""The full-history families, in the order a scrape prints them."""


def history_part(snapshots: Callable[[], Mapping[str, CheckSnapshot]]) -> CollectorPart:
    """Return the part that yields the driftgauge_history_* families."""

    def collect() -> Iterable[Metric]:
        f = build(HISTORY)
        for name, snap in sorted(snapshots().items()):
            judged = [b for b in snap.history if b.status != "settling"]
            if not judged:
                # No day of it was ever judged: publish nothing rather than zeros.
                continue
            counted = [bucket_rows(b) for b in judged]
            for kind in ROW_KINDS:
                f["rows"].add_metric([name, kind], sum(r[kind] for r in counted))
            for direction in DRIFT_KINDS:
                days = [
                    b
                    for b, r in zip(judged, counted, strict=True)
                    if b.status == "drift" and r[direction] > 0
                ]
                f["in_drift"].add_metric([name, direction], len(days))
                if days:
                    first = min(b.start for b in days)
                    f["oldest"].add_metric([name, direction], first.timestamp())
        return list(f.values())

    return collect
