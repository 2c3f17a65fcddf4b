"""Ledger, canary, vocabulary and volume parts against the contract in docs/metrics.md."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from prometheus_client import generate_latest

from driftgauge.canary.metrics import CanaryMetrics
from driftgauge.canary.probe import CanaryResult
from driftgauge.canary.store import CanarySnapshot
from driftgauge.ledger.metrics import LedgerMetrics
from driftgauge.ledger.store import LedgerSnapshot, OpenBreaches
from driftgauge.metrics.collector import build_registry
from driftgauge.signals.metrics import SignalsMetrics
from driftgauge.signals.store import SignalsSnapshot

from .metrics_doc import documented_rows, exposed, ticked

T = datetime(2026, 3, 10, 12, tzinfo=UTC)
JOB = {"sync_job": "review-sync"}


class Snap:
    """A store that hands out a fixed snapshot."""

    def __init__(self, snap: Any) -> None:
        self.snap = snap

    async def snapshot(self, names: Any) -> Any:
        return self.snap


async def parts() -> list[Any]:
    ledger = LedgerMetrics(
        Snap(
            LedgerSnapshot(
                latest_window={"review-sync": date(2026, 3, 9)},
                open={("review-sync", "duplicate_summary"): OpenBreaches(2, date(2026, 3, 7))},
                breaches={("review-sync", "duplicate_summary"): 2},
                last_summary={"review-sync": T},
                runs={("review-sync", "success"): 3},
            )
        ),
        ["review-sync"],
    )
    canary = CanaryMetrics(
        Snap(
            CanarySnapshot(
                latest={"reviews": CanaryResult("reviews", "permission", T, 0.25, "k", "HTTP 403")},
                last_success={"reviews": T},
                runs={("reviews", "ok"): 4, ("reviews", "permission"): 1},
            )
        ),
        ["reviews"],
    )
    signals = SignalsMetrics(
        Snap(
            SignalsSnapshot(
                vocabulary={("reviews", "label"): (1, 35)},
                volume={
                    ("reviews", date(2026, 3, 7)): ("insufficient_history", 3),
                    ("reviews", date(2026, 3, 8)): ("anomaly", 30),
                    ("reviews", date(2026, 3, 9)): ("ok", 30),
                },
            )
        ),
        ["reviews"],
    )
    for p in (ledger, canary, signals):
        await p.refresh()
    return [ledger, canary, signals]


def _documented(sections: tuple[str, ...]) -> dict[str, tuple[str, set[str]]]:
    keep = {"check", "day", "sync_job", "rule", "status", "result", "field"}
    return {
        name: (kind, {lab for lab in ticked(cell) if lab in keep})
        for name, kind, cell in documented_rows(sections)
    }


async def test_exposition_matches_the_documented_names_types_and_labels() -> None:
    text = generate_latest(build_registry(await parts())).decode()
    assert exposed(text) == _documented(("Canary", "Run ledger", "Vocabulary and volume"))


async def test_values_come_from_the_latest_snapshot() -> None:
    v = build_registry(await parts()).get_sample_value
    assert v("driftgauge_ledger_breach", {**JOB, "rule": "duplicate_summary"}) == 1
    assert v("driftgauge_ledger_breach", {**JOB, "rule": "failed_writes"}) == 0
    assert v("driftgauge_ledger_breach_windows", {**JOB, "rule": "duplicate_summary"}) == 2
    assert (
        v(
            "driftgauge_ledger_oldest_breach_window_timestamp_seconds",
            {**JOB, "rule": "duplicate_summary"},
        )
        == datetime(2026, 3, 7, tzinfo=UTC).timestamp()
    )
    assert (
        v(
            "driftgauge_ledger_oldest_breach_window_timestamp_seconds",
            {**JOB, "rule": "failed_writes"},
        )
        is None
    )
    assert v("driftgauge_ledger_breaches_total", {**JOB, "rule": "duplicate_summary"}) == 2
    assert v("driftgauge_canary_up", {"check": "reviews"}) == 0
    assert (
        v("driftgauge_canary_last_success_timestamp_seconds", {"check": "reviews"}) == T.timestamp()
    )
    assert v("driftgauge_canary_runs_total", {"check": "reviews", "result": "timeout"}) == 0
    assert v("driftgauge_vocabulary_unmatched_rows", {"check": "reviews", "field": "label"}) == 35
    assert v("driftgauge_volume_anomaly", {"check": "reviews", "day": "2026-03-08"}) == 1
    assert v("driftgauge_volume_anomaly", {"check": "reviews", "day": "2026-03-09"}) == 0
    short = {"check": "reviews", "day": "2026-03-07"}
    assert v("driftgauge_volume_anomaly", short) is None
    assert v("driftgauge_volume_status", {**short, "status": "insufficient_history"}) == 1
    assert v("driftgauge_volume_history_buckets", short) == 3


async def test_nothing_is_published_before_the_first_load() -> None:
    part = LedgerMetrics(Snap(None), ["review-sync"])
    assert list(part()) == []
