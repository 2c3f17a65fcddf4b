"""Collector part: the run-ledger series of docs/metrics.md, from stored verdicts."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from driftgauge.ledger.models import RULES
from driftgauge.ledger.store import LedgerSnapshot
from driftgauge.metrics.stored import StoredPart

RUN_STATUSES = ("success", "partial_failure", "failed")


class LedgerMetrics(StoredPart[LedgerSnapshot]):
    """Yield ledger metric families from the latest snapshot; `refresh` reloads it.

    A failed refresh keeps the previous snapshot, so a state-database hiccup never
    publishes zeros.
    """

    def families(self, snap: LedgerSnapshot) -> Iterable[Metric]:
        """Return the ledger families for one scrape."""
        breach = GaugeMetricFamily(
            "driftgauge_ledger_breach",
            "1 while the latest window of the job breaches the rule.", labels=["sync_job", "rule"])
        total = CounterMetricFamily("driftgauge_ledger_breaches", "Breaches recorded.",
                                    labels=["sync_job", "rule"])
        last = GaugeMetricFamily("driftgauge_ledger_last_summary_timestamp_seconds",
                                 "When the job last closed a run with a summary.",
                                 labels=["sync_job"])
        runs = CounterMetricFamily("driftgauge_ledger_runs",
                                   "Ledger runs by the job's reported status.",
                                   labels=["sync_job", "status"])
        for job in self._names:
            if job in snap.latest_window:
                active = snap.active.get(job, frozenset())
                for rule in RULES:
                    breach.add_metric([job, rule], 1.0 if rule in active else 0.0)
            for rule in RULES:
                total.add_metric([job, rule], snap.breaches.get((job, rule), 0))
            if job in snap.last_summary:
                last.add_metric([job], snap.last_summary[job].timestamp())
            for status in RUN_STATUSES:
                runs.add_metric([job, status], snap.runs.get((job, status), 0))
        return [breach, total, last, runs]
