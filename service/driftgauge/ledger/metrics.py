"""Collector part: the run-ledger series of docs/metrics.md, from stored verdicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import get_args
from zoneinfo import ZoneInfo

from prometheus_client.core import Metric

from driftgauge.ledger.models import RULES, RunStatus
from driftgauge.ledger.store import LedgerSnapshot
from driftgauge.metrics.families import Spec, build
from driftgauge.metrics.stored import SnapshotStore, StoredPart

RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
UTC = ZoneInfo("UTC")


LEDGER = {
    "breach": Spec(
        "driftgauge_ledger_breach",
        "1 while any judged window of the job still breaches the rule.",
        ("sync_job", "rule"),
    ),
    "windows": Spec(
        "driftgauge_ledger_breach_windows",
        "Judged windows of the job that still breach the rule.",
        ("sync_job", "rule"),
    ),
    "oldest": Spec(
        "driftgauge_ledger_oldest_breach_window_timestamp_seconds",
        "Start of the oldest window of the job that still breaches the rule.",
        ("sync_job", "rule"),
    ),
    "total": Spec(
        "driftgauge_ledger_breaches", "Breaches recorded.", ("sync_job", "rule"), "counter"
    ),
    "last": Spec(
        "driftgauge_ledger_last_closed_run_timestamp_seconds",
        "When the job last closed a run with its summary.",
        ("sync_job",),
    ),
    "runs": Spec(
        "driftgauge_ledger_runs",
        "Ledger runs by the job's reported status.",
        ("sync_job", "status"),
        "counter",
    ),
}
"""The run-ledger families, in the order a scrape prints them."""


def _day_start(day: date, tz: ZoneInfo) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()


class LedgerMetrics(StoredPart[LedgerSnapshot]):
    """Yield ledger metric families from the latest snapshot; `refresh` reloads it.

    A failed refresh keeps the previous snapshot, so a state-database hiccup never
    publishes zeros.
    """

    def __init__(
        self,
        store: SnapshotStore[LedgerSnapshot],
        names: Sequence[str],
        timezones: Mapping[str, ZoneInfo] | None = None,
    ) -> None:
        super().__init__(store, names)
        self._tz = dict(timezones or {})

    def families(self, snap: LedgerSnapshot) -> Iterable[Metric]:
        """Return the ledger families for one scrape."""
        f = build(LEDGER)
        for job in self._names:
            if job in snap.latest_window:
                for rule in RULES:
                    found = snap.open.get((job, rule))
                    n = found.windows if found is not None else 0
                    f["breach"].add_metric([job, rule], 1.0 if n else 0.0)
                    f["windows"].add_metric([job, rule], n)
                    if found is not None:
                        f["oldest"].add_metric(
                            [job, rule], _day_start(found.oldest, self._tz.get(job, UTC))
                        )
            for rule in RULES:
                f["total"].add_metric([job, rule], snap.breaches.get((job, rule), 0))
            if job in snap.last_summary:
                f["last"].add_metric([job], snap.last_summary[job].timestamp())
            for status in RUN_STATUSES:
                f["runs"].add_metric([job, status], snap.runs.get((job, status), 0))
        return list(f.values())
