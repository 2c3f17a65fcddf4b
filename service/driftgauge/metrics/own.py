"""Collector part: this process's own work (store call durations and errors, run durations)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

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


STORE_COUNTERS = (
    (
        "driftgauge_store_errors",
        "Store calls made by this process that failed.",
        ["store", "kind"],
        observe.ERROR_KINDS,
        observe.STORE_ERRORS,
    ),
    (
        "driftgauge_store_rows_scanned",
        "Rows that this process's store calls digested or returned.",
        ["store", "operation"],
        observe.SCANS,
        observe.ROWS_SCANNED,
    ),
)
"""Per-store counters: name, help, labels, the second label's values, the counts."""


def _counter(
    name: str,
    doc: str,
    labels: list[str],
    always: set[tuple[str, ...]],
    counts: observe.LabelCounts,
) -> CounterMetricFamily:
    """Return a counter family with a series for each of `always` from the start."""
    fam = CounterMetricFamily(name, doc, labels=labels)
    got = counts.snapshot()
    for values in sorted(always | set(got)):
        fam.add_metric(list(values), got.get(values, 0))
    return fam


def own_part(stores: Sequence[str]) -> CollectorPart:
    """Return the part that yields the store-call and run-duration families.

    Every (store, kind) of `stores` has an error series, and every (store, operation) a
    rows-scanned series, from the start, so rate() sees the first one; durations appear
    once a call or run has finished.
    """

    def collect() -> Iterable[Metric]:
        yield _histogram(
            "driftgauge_store_query_duration_seconds",
            "Duration of store calls made by this process.",
            ["store", "operation"],
            observe.STORE_QUERIES,
        )
        yield _histogram(
            "driftgauge_store_slot_wait_seconds",
            "Time store calls of this process waited for one of their store's query slots.",
            ["store"],
            observe.SLOT_WAITS,
        )
        waiting = GaugeMetricFamily(
            "driftgauge_store_queries_waiting",
            "Store calls of this process waiting for a query slot now.",
            labels=["store"],
        )
        for (store,), n in sorted(observe.SLOT_WAITING.snapshot().items()):
            waiting.add_metric([store], n)
        yield waiting
        for name, doc, labels, values, counts in STORE_COUNTERS:
            always: set[tuple[str, ...]] = {(store, v) for store in stores for v in values}
            yield _counter(name, doc, labels, always, counts)
        yield _histogram(
            "driftgauge_run_duration_seconds",
            "Wall time of runs made by this process, whatever their outcome.",
            ["check", "trigger"],
            observe.RUNS,
        )

    return collect
