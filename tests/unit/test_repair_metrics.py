"""The repair collector part against the Repair section of docs/metrics.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftgauge.metrics.collector import build_registry
from driftgauge.repair.metrics import RepairMetrics, RepairSnapshot

from .metrics_doc import documented_rows, exposed, ticked

T = datetime(2026, 3, 16, 12, tzinfo=UTC)
LABELS = {
    "pipeline",
    "measure",
    "status",
    "check",
    "step",
    "rule",
    "kind",
    "subject",
    "consumer",
    "partition",
    "side",
}


def _documented() -> dict[str, tuple[str, set[str]]]:
    return {
        name: (kind, {lab for lab in ticked(cell) if lab in LABELS})
        for name, kind, cell in documented_rows(("Repair",))
    }


def _part() -> RepairMetrics:
    part = RepairMetrics(None, lambda: T)  # type: ignore[arg-type, unused-ignore]
    facts = {
        "check": "orders",
        "consumer": "settlement-report",
        "start": "2026-03-15T02:00:00+00:00",
        "before": {"count": 10},
        "after": {"count": 11, "measures": {"amount": "12.5"}},
    }
    part.snap = RepairSnapshot(
        watermarks=[
            {
                "pipeline": "orders-fact",
                "processed_through": T - timedelta(hours=3),
                "advanced_at": T - timedelta(hours=1),
            }
        ],
        backfills={"closed": 1, "running": 1},
        oldest_open={"orders": T - timedelta(hours=2)},
        refusals={("start", "not_announced"): 2},
        active=[
            {
                "kind": "silent_change",
                "subject": "orders/settlement-report/x",
                "facts": json.dumps(facts),
            }
        ],
        recorded={"silent_change": 1},
    )
    return part


def test_exposition_matches_the_documented_repair_section() -> None:
    text = generate_latest(build_registry([_part()])).decode()
    assert exposed(text) == _documented()


def test_ages_and_the_silent_change_read_from_the_snapshot() -> None:
    fams = {
        f.name: f
        for f in text_string_to_metric_families(generate_latest(build_registry([_part()])).decode())
    }
    age = fams["driftgauge_watermark_age_seconds"].samples[0]
    assert age.value == 3 * 3600
    assert fams["driftgauge_backfill_open_seconds"].samples[0].value == 2 * 3600
    rows = {s.labels["side"]: s.value for s in fams["driftgauge_silent_change_rows"].samples}
    assert rows == {"before": 10, "after": 11}
    amounts = fams["driftgauge_silent_change_amount"].samples
    assert [(s.labels["measure"], s.labels["side"], s.value) for s in amounts] == [
        ("amount", "after", 12.5)
    ]


def test_nothing_is_published_before_the_first_load() -> None:
    part = RepairMetrics(None, lambda: T)  # type: ignore[arg-type, unused-ignore]
    assert list(part()) == []
