"""Collector part: this process's own work (store call durations and errors, run durations)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from driftgauge import observe
from driftgauge.metrics.collector import CollectorPart


def _histogram(
    name: str, doc: str, labels: list[str], hist: observe.Histogram
) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, doc, labels=labels)
    # As client libraries write `le`: 1.0, not 1.
    bounds = [*(repr(float(b)) for b in hist.bounds), "+Inf"]
    for values, (counts, total) in sorted(hist.snapshot().items()):
        fam.add_metric(list(values), list(zip(bounds, counts, strict=True)), total)
    return fam


def own_part(stores: Sequence[str]) -> CollectorPart:
    """Return the part that yields the store-call and run-duration families.

    Every (store, kind) of `stores` has an error series from the start, so rate() sees the
    first error; durations appear once a call or run has finished.
    """

    def collect() -> Iterable[Metric]:
        yield _histogram(
            "driftgauge_store_query_duration_seconds",
            "Duration of store calls made by this process.",
            ["store", "operation"],
            observe.STORE_QUERIES,
        )
        errors = CounterMetricFamily(
            "driftgauge_store_errors",
            "Store calls made by this process that failed.",
            labels=["store", "kind"],
        )
        got = observe.error_counts()
        keys = {(s, k) for s in stores for k in observe.ERROR_KINDS} | set(got)
        for store, kind in sorted(keys):
            errors.add_metric([store, kind], got.get((store, kind), 0))
        yield errors
        yield _histogram(
            "driftgauge_run_duration_seconds",
            "Wall time of runs made by this process, whatever their outcome.",
            ["check", "trigger"],
            observe.RUNS,
        )

    return collect
