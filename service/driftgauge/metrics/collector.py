"""The /metrics collector: small parts, each yielding metric families from stored data."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from driftgauge.engine.explain import REASON as UNEXPLAINED
from driftgauge.engine.result import DRIFT_KINDS, BucketResult
from driftgauge.metrics.families import Spec, build
from driftgauge.metrics.snapshot import CheckSnapshot

CollectorPart = Callable[[], Iterable[Metric]]
"""One source of metric families; called at every scrape."""
ROW_KINDS = ("expected", "visible", "excluded", "missing", "extra", "mismatched", "duplicates")
BUCKET_STATUSES = ("ok", "drift", "settling", "error")
RUN_STATUSES = ("ok", "drift", "error", "nothing_judged")


class PartsCollector(Collector):
    """Yield the families of every part, in order."""

    def __init__(self, parts: Sequence[CollectorPart]) -> None:
        self._parts = list(parts)

    def collect(self) -> Iterable[Metric]:
        """Return every part's metric families for this scrape."""
        for part in self._parts:
            yield from part()


def build_registry(parts: Sequence[CollectorPart]) -> CollectorRegistry:
    """Return a fresh registry (never the global one) holding a collector of the parts."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PartsCollector(parts))
    return registry


def process_part(version: str) -> CollectorPart:
    """Return the part that yields driftgauge_build_info."""

    def collect() -> Iterable[Metric]:
        info = GaugeMetricFamily(
            "driftgauge_build_info",
            "Always 1; labelled with the version and the Python version.",
            labels=["version", "python"],
        )
        info.add_metric([version, platform.python_version()], 1)
        yield info

    return collect


def bucket_rows(b: BucketResult) -> dict[str, int]:
    """Return a bucket's row count per kind of ROW_KINDS."""
    return {
        "expected": b.expected,
        "visible": b.visible,
        "excluded": b.excluded_total,
        "missing": b.missing,
        "extra": b.extra,
        "mismatched": b.mismatched,
        "duplicates": b.duplicates,
    }


def reconciliation_part(snapshots: Callable[[], Mapping[str, CheckSnapshot]]) -> CollectorPart:
    """Return the part that yields per-check and per-bucket reconciliation metrics."""

    def collect() -> Iterable[Metric]:
        fam = _Families()
        for name, snap in sorted(snapshots().items()):
            fam.add_check(name, snap)
        yield from fam.all()

    return collect


RECONCILIATION = {
    "up": Spec("driftgauge_check_up", "1 if the latest run completed, 0 if it failed.", ("check",)),
    "last_run": Spec(
        "driftgauge_check_last_run_timestamp_seconds",
        "When the latest run finished (or failed).",
        ("check",),
    ),
    "last_success": Spec(
        "driftgauge_check_last_success_timestamp_seconds",
        "When the latest completed run finished.",
        ("check",),
    ),
    "duration": Spec(
        "driftgauge_check_run_duration_seconds", "Wall time of the latest run.", ("check",)
    ),
    "runs": Spec(
        "driftgauge_check_runs",
        "Runs recorded in the state database.",
        ("check", "status"),
        "counter",
    ),
    "run_status": Spec(
        "driftgauge_check_run_status",
        "1 for the latest finished run's status, 0 otherwise.",
        ("check", "status"),
    ),
    "schedule": Spec(
        "driftgauge_check_schedule_seconds", "Interval of the recent-window schedule.", ("check",)
    ),
    "bucket_rows": Spec(
        "driftgauge_bucket_rows",
        "Per-bucket row counts of the latest completed run.",
        ("check", "day", "kind"),
    ),
    "bucket_excluded": Spec(
        "driftgauge_bucket_excluded_rows",
        "Excluded rows per bucket and reason.",
        ("check", "day", "reason"),
    ),
    "bucket_status": Spec(
        "driftgauge_bucket_status",
        "1 for the bucket's current status, 0 otherwise.",
        ("check", "day", "status"),
    ),
    "unexplained": Spec(
        "driftgauge_bucket_unexplained",
        "1 if the bucket's found differences do not account for its digests' difference.",
        ("check", "day"),
    ),
    "measure_total": Spec(
        "driftgauge_bucket_measure",
        "Each side's total of a measure per bucket (a float: the exact "
        "total is the API's decimal text).",
        ("check", "day", "side", "measure"),
    ),
    "rows": Spec(
        "driftgauge_rows",
        "Row counts summed over the recent window (settling buckets excluded).",
        ("check", "kind"),
    ),
    "excluded": Spec(
        "driftgauge_excluded_rows",
        "Excluded rows per reason over the recent window.",
        ("check", "reason"),
    ),
    "limits": Spec(
        "driftgauge_exclusion_rate_limit",
        "The configured exclusion-rate tolerance per reason.",
        ("check", "reason"),
    ),
    "in_drift": Spec(
        "driftgauge_buckets_in_drift",
        "Buckets of the window in drift with rows in that direction.",
        ("check", "direction"),
    ),
    "strategies": Spec(
        "driftgauge_buckets_by_strategy",
        "Judged buckets of the window per strategy the planner took for them.",
        ("check", "strategy"),
    ),
}
"""The per-check and per-bucket families, in the order a scrape prints them."""


class _Families:
    """The reconciliation families of one scrape, filled check by check."""

    def __init__(self) -> None:
        self._fam = build(RECONCILIATION)

    def add_check(self, name: str, snap: CheckSnapshot) -> None:
        """Add one check's series."""
        f = self._fam
        last = snap.last_run
        if last is not None and last.finished_at is not None:
            # A failed latest run reads 0 here; the row series below keep their last values.
            f["up"].add_metric([name], 0 if last.status == "error" else 1)
            f["last_run"].add_metric([name], last.finished_at.timestamp())
            if last.duration_seconds is not None:
                f["duration"].add_metric([name], last.duration_seconds)
            # A run that judged nothing is not a pass: it has a status of its own.
            for status in RUN_STATUSES:
                f["run_status"].add_metric([name, status], int(last.status == status))
        ok = snap.last_success
        if ok is not None and ok.finished_at is not None:
            f["last_success"].add_metric([name], ok.finished_at.timestamp())
        for status in RUN_STATUSES:
            f["runs"].add_metric([name, status], snap.run_counts.get(status, 0))
        if snap.schedule_seconds is not None:
            f["schedule"].add_metric([name], snap.schedule_seconds)
        for reason, limit in sorted(snap.exclusion_limits.items()):
            f["limits"].add_metric([name, reason], limit)
        self._add_buckets(name, snap.buckets)

    def _add_buckets(self, name: str, buckets: Sequence[BucketResult]) -> None:
        f = self._fam
        totals = dict.fromkeys(ROW_KINDS, 0)
        excluded: dict[str, int] = {}
        drifting = dict.fromkeys(DRIFT_KINDS, 0)
        strategies: dict[str, int] = {}
        for b in buckets:
            day = b.start.date().isoformat()
            rows = bucket_rows(b)
            for kind in ROW_KINDS:
                f["bucket_rows"].add_metric([name, day, kind], rows[kind])
            for reason, n in sorted(b.excluded.items()):
                f["bucket_excluded"].add_metric([name, day, reason], n)
            for status in BUCKET_STATUSES:
                f["bucket_status"].add_metric([name, day, status], int(b.status == status))
            for side, agg in (("source", b.source), ("reader", b.reader)):
                for measure, total in sorted((agg.measures or {}).items()):
                    f["measure_total"].add_metric([name, day, side, measure], float(total))
            f["unexplained"].add_metric(
                [name, day],
                int(b.status == "error" and any(r.startswith(UNEXPLAINED) for r in b.reasons)),
            )
            if b.status == "settling":
                continue
            for kind in ROW_KINDS:
                totals[kind] += rows[kind]
            if b.strategy is not None:
                strategies[b.strategy] = strategies.get(b.strategy, 0) + 1
            for reason, n in b.excluded.items():
                excluded[reason] = excluded.get(reason, 0) + n
            if b.status == "drift":
                for direction in DRIFT_KINDS:
                    drifting[direction] += int(rows[direction] > 0)
        if not buckets:
            # No completed run yet: publish nothing rather than zeros that look like health.
            return
        for kind in ROW_KINDS:
            f["rows"].add_metric([name, kind], totals[kind])
        for reason, n in sorted(excluded.items()):
            f["excluded"].add_metric([name, reason], n)
        for direction in DRIFT_KINDS:
            f["in_drift"].add_metric([name, direction], drifting[direction])
        for strategy, n in sorted(strategies.items()):
            f["strategies"].add_metric([name, strategy], n)

    def all(self) -> list[Metric]:
        """Return every family, including empty ones (they print only HELP and TYPE)."""
        return list(self._fam.values())
