"""`promtool check metrics` over the app's full /metrics, every part populated from the state DB.

Reconciliation (recent and full-history runs), run ledger (a breach), canary (a failure),
vocabulary and volume (a day with too little history): a name any part serves that
promtool's linter refuses fails here, before a Prometheus operator finds it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftgauge.canary.probe import CanaryResult
from driftgauge.configfile.loader import load_text
from driftgauge.signals.vocabulary import VocabularyResult
from driftgauge.signals.volume import VolumeDay
from driftgauge.stores.memory import MemoryAdapter

from .app_helpers import finished_run, memory_app, posted, serving
from .service_helpers import REVIEWS_SIDES, STORES, day_rows, filled, hashed, key_of, schema_name

pytestmark = pytest.mark.integration
DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
FIRST = datetime(2026, 2, 20, tzinfo=UTC)
JOB = "review-sync"

CONFIG = (
    STORES
    + """state: {dsn: "<DSN>", schema: <SCHEMA>}
api: {tokens: ["<TOKEN>"], public_read: true, sample_keys: 20}
checks:
"""
    + REVIEWS_SIDES
    + """      filter:
        bool:
          filter: [{terms: {label: [ok]}}]
          must_not: [{exists: {field: driftgauge_canary}}]
    fields: {label: string}
    settle: 2h
    tolerance: {exclusion_rate: {no_join_key: 0.5}}
    schedule: {recent: {every: 1h, days: 3}, full: {every: 7d, days: 30}}
    ledger: {job: <JOB>, no_match_rate: 0.01}
    canary: {store: dst, document: {label: ok}, every: 1h}
    vocabulary: {label: {}}
    volume: {trailing: 7}
"""
)

# Every part and every kind of series it serves, each with at least one sample here.
POPULATED = (
    "driftgauge_check_up",
    "driftgauge_check_last_success_timestamp_seconds",
    "driftgauge_check_runs",
    "driftgauge_bucket_rows",
    "driftgauge_bucket_excluded_rows",
    "driftgauge_bucket_status",
    "driftgauge_rows",
    "driftgauge_excluded_rows",
    "driftgauge_exclusion_rate_limit",
    "driftgauge_buckets_in_drift",
    "driftgauge_history_rows",
    "driftgauge_history_buckets_in_drift",
    "driftgauge_history_oldest_drift_day_timestamp_seconds",
    "driftgauge_ledger_breach",
    "driftgauge_ledger_breach_windows",
    "driftgauge_ledger_oldest_breach_window_timestamp_seconds",
    "driftgauge_ledger_breaches",
    "driftgauge_ledger_last_closed_run_timestamp_seconds",
    "driftgauge_ledger_runs",
    "driftgauge_canary_up",
    "driftgauge_canary_duration_seconds",
    "driftgauge_canary_last_success_timestamp_seconds",
    "driftgauge_canary_runs",
    "driftgauge_vocabulary_unmatched_values",
    "driftgauge_vocabulary_unmatched_rows",
    "driftgauge_volume_anomaly",
    "driftgauge_volume_status",
    "driftgauge_volume_history_buckets",
    "driftgauge_background_errors",
    "driftgauge_build_info",
    "driftgauge_store_query_duration_seconds",
    "driftgauge_store_errors",
    "driftgauge_run_duration_seconds",
    "process_cpu_seconds",
)


def _sides() -> dict[tuple[str, str], MemoryAdapter]:
    rows = [r for d in range(19) for r in day_rows(FIRST + timedelta(days=d), 20)]
    # An old day lost an update and a recent one lost a row; excluded rows on every day.
    lost = next(r for r in rows if r.event_time.date() == date(2026, 2, 25))
    gone = next(r for r in rows if r.event_time.date() == date(2026, 3, 8))
    reader = [
        hashed(key_of(r), "old", r.event_time) if r.key == lost.key else r
        for r in rows
        if r.key != gone.key
    ]
    excluded = [(FIRST + timedelta(days=d, hours=5), "no_join_key") for d in range(19)]
    return {
        ("src", "reviews"): MemoryAdapter(rows, excluded=excluded),
        ("dst", "reviews"): MemoryAdapter(reader),
    }


async def _report_ledger_run(client: httpx.AsyncClient) -> None:
    start = datetime(2026, 3, 9, tzinfo=UTC)
    window = {
        "job": JOB,
        "window_start": start.isoformat(),
        "window_end": (start + timedelta(days=1)).isoformat(),
        "input_rows": 20,
    }
    run_id = (await posted(client, "/api/v1/ledger/runs", window, 201))["id"]
    counts = [
        {"outcome": "written", "count": 15},
        {"outcome": "no_match", "reason": "no_document", "count": 5},
    ]
    await posted(
        client, f"/api/v1/ledger/runs/{run_id}/batches", {"batch_id": "all", "counts": counts}
    )
    await posted(client, f"/api/v1/ledger/runs/{run_id}/close", {"status": "success"})


async def _record_audit_results(audit: Any) -> None:
    await audit.canary.store.record(
        CanaryResult("reviews", "ok", NOW - timedelta(hours=1), 0.4, "k1")
    )
    await audit.canary.store.record(
        CanaryResult("reviews", "not_visible", NOW, 20.0, "k2", "not visible within 20s")
    )
    await audit.signals.store.record_vocabulary(
        [VocabularyResult("reviews", "label", FIRST, NOW, {"third_tier": 3, None: 1})], NOW
    )
    await audit.signals.store.record_volume(
        "reviews",
        [
            VolumeDay(date(2026, 3, 7), 20, 0.0, 0.0, 0.0, 0.0, 5, "insufficient_history"),
            VolumeDay(date(2026, 3, 8), 20, 20.0, 0.0, 20.0, 20.0, 7, "ok"),
            VolumeDay(date(2026, 3, 9), 0, 20.0, 0.0, 20.0, 20.0, 7, "anomaly"),
        ],
        NOW,
    )
    await audit.tick(NOW)


async def _full_exposition(dsn: str) -> str:
    config = load_text(filled(CONFIG, dsn, schema_name(), job=JOB))
    app = memory_app(config, _sides(), lambda: NOW, refresh_every=3600)
    async with serving(app) as client:
        await finished_run(client, "full")
        await finished_run(client, "recent")
        await _report_ledger_run(client)
        await _record_audit_results(app.state.audit)
        # A run reads "finished" a moment before its tick reloads the snapshot: reload it now.
        await app.state.runtime.snapshots.refresh()
        resp = await client.get("/metrics")
    assert resp.status_code == 200
    return resp.text


def _documented() -> set[str]:
    found = re.findall(r"^\| `(driftgauge_\w+)` \|", DOCS.read_text("utf-8"), re.MULTILINE)
    return {n.removesuffix("_total") for n in found}


@pytest.fixture(scope="module")
async def exposition(pg_database: str) -> str:
    return await _full_exposition(pg_database)


async def test_every_part_is_populated(exposition: str) -> None:
    families = {f.name: f for f in text_string_to_metric_families(exposition)}
    empty = [n for n in POPULATED if not (n in families and families[n].samples)]
    assert not empty, f"families without samples: {empty}"
    # Every series docs/metrics.md promises is served (at least its HELP and TYPE).
    assert _documented() - families.keys() == set()
    assert families["driftgauge_history_buckets_in_drift"].samples


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_check_metrics_accepts_the_full_exposition(exposition: str) -> None:
    done = subprocess.run(
        ["promtool", "check", "metrics"],
        input=exposition.encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    out = (done.stdout + done.stderr).decode()
    assert done.returncode == 0 and not out.strip(), out
