"""Each fact counted once: only the elected replica exports the series read from the state DB."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from driftgauge.metrics.collector import CollectorPart

IsLeader = Callable[[], bool]
"""Whether this replica is the exporter now; asked at every scrape."""


def exporter_part(is_leader: IsLeader) -> CollectorPart:
    """Return the part that yields driftgauge_exporter_leader, on every replica."""

    def collect() -> Iterable[Metric]:
        fam = GaugeMetricFamily(
            "driftgauge_exporter_leader",
            "1 on the replica that exports the series read from the state database, 0 elsewhere.",
        )
        fam.add_metric([], 1.0 if is_leader() else 0.0)
        yield fam

    return collect


def stored_parts(is_leader: IsLeader, parts: Sequence[CollectorPart]) -> CollectorPart:
    """Return one part yielding `parts` on the exporter and nothing on the other replicas.

    Every replica reads the same stored runs: were each to export them, a sum over replicas
    would count every run, bucket and breach once per replica.
    """
    held = list(parts)

    def collect() -> Iterable[Metric]:
        if not is_leader():
            return
        for part in held:
            yield from part()

    return collect
