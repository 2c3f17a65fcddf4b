"""The store part of /metrics: retries of store reads made by this process."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, Metric

from driftgauge.metrics.collector import CollectorPart
from driftgauge.stores import retries

Counts = Callable[[], Mapping[tuple[str, str], int]]


def store_retries_part(
    stores: Sequence[str], counts: Counts = retries.retry_counts
) -> CollectorPart:
    """Return the part that yields driftgauge_store_retries_total, every reason of `stores`.

    Unlike the stored results, these counts live in the process: they restart at 0, as
    counters may. Every (store, reason) is present from the start so rate() sees the first.
    """

    def collect() -> Iterable[Metric]:
        fam = CounterMetricFamily(
            "driftgauge_store_retries",
            "Store reads retried after a transient failure.",
            labels=["store", "reason"],
        )
        got = dict(counts())
        keys = {(s, r) for s in stores for r in retries.REASONS} | set(got)
        for store, reason in sorted(keys):
            fam.add_metric([store, reason], got.get((store, reason), 0))
        yield fam

    return collect
