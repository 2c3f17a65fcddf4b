"""The repair answers' models write the JSON the dicts wrote: same keys, order and times."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.encoders import jsonable_encoder
from pydantic import BaseModel

from driftgauge.repair.models import (
    BackfillOut,
    BackfillShown,
    ConsumerOut,
    JudgedOut,
    ProbeOut,
    ReadOut,
    ReadsRecorded,
    RepairBreachOut,
    RunAttached,
    WatermarkOut,
    WatermarkShown,
)

T0 = datetime(2026, 3, 15, 5, 0, 0, 123456, tzinfo=UTC)
WATERMARK: dict[str, Any] = {
    "pipeline": "orders",
    "processed_through": T0,
    "check": None,
    "stall_after_seconds": 3600.0,
    "advanced_at": T0,
    "updated_at": T0 + timedelta(seconds=1),
    "updated_by": "sync",
    "reason": "hourly",
}
MOVE = {
    "moved_at": T0,
    "from": None,
    "to": T0,
    "direction": "set",
    "by": "sync",
    "reason": "hourly",
    "backfill_id": None,
}
SNAP = {"count": 3, "distinct_keys": 3, "digest": "18446744073709551615"}
BACKFILL: dict[str, Any] = {
    "id": 7,
    "check": "orders",
    "pipeline": "orders",
    "status": "announced",
    "reason": "late rows",
    "first_bad": T0,
    "reset_to": T0 - timedelta(hours=1),
    "planned_at": T0,
    "planned_by": "ops",
    "announced_at": T0,
    "announced_by": "ops",
    "announcement": "recompute 1 partition",
    "started_at": None,
    "started_by": None,
    "verified_at": None,
    "replayed_at": None,
    "closed_at": None,
    "closed_by": None,
    "totals_before": {"partitions": 1, "count": 3, "measures": {"amount": "1.50"}},
    "totals_after": None,
    "diff": None,
    "next_step": "start",
    "partitions": [(T0, T0 + timedelta(hours=1))],
    "targets": [
        {
            "start": T0,
            "end": T0 + timedelta(hours=1),
            "run_id": 4,
            "before": SNAP,
            "after": None,
            "verified": None,
        }
    ],
    "consumers": [
        {
            "name": "settlement-report",
            "rank": 1,
            "signs": True,
            "kind": "report",
            "owner": "finance",
            "signed_by": "cfo",
            "webhook_url": "http://hook",
            "command": None,
            "replay": None,
        },
        {
            "name": "gone",
            "rank": 2,
            "signs": False,
            "kind": None,
            "owner": None,
            "signed_by": None,
            "webhook_url": None,
            "command": "make it",
            "replay": {"outcome": "running", "started_at": T0, "finished_at": None, "detail": ""},
        },
    ],
}
CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (BackfillOut, BACKFILL),
    (
        BackfillShown,
        {
            **BACKFILL,
            "ledger_runs": [11, 12],
            "events": [
                {
                    "at": T0,
                    "step": "plan",
                    "outcome": "done",
                    "rule": "",
                    "by": "ops",
                    "consumer": None,
                    "detail": "1 partition(s)",
                }
            ],
        },
    ),
    (
        ProbeOut,
        {
            "check": "orders",
            "mode": "ledger",
            "subject": "orders-sync runs 11, 12",
            "verdict": "appended",
            "partitions": [
                {
                    "start": T0,
                    "end": T0 + timedelta(days=1),
                    "run1": SNAP,
                    "run2": {**SNAP, "count": 4, "measures": {"amount": "2.00"}},
                    "verdict": "appended",
                    "appended": 1,
                }
            ],
            "ledger_runs": [11, 12],
        },
    ),
    (WatermarkOut, WATERMARK),
    (WatermarkShown, {**WATERMARK, "moves": [MOVE, {**MOVE, "from": T0, "backfill_id": 3}]}),
    (
        ConsumerOut,
        {
            "name": "settlement-report",
            "kind": "report",
            "owner": "finance",
            "rank": 1,
            "webhook_url": None,
            "command": "make report",
            "signs": True,
            "signed_by": "cfo",
            "created_at": T0,
            "updated_at": T0,
        },
    ),
    (ReadsRecorded, {"recorded": 2}),
    (
        ReadOut,
        {
            "consumer": "settlement-report",
            "check": "orders",
            "start": T0,
            "end": T0 + timedelta(hours=1),
            "read_at": T0,
            "seen": {"count": 3, "measures": {"amount": "1.50"}},
            "backfill_id": None,
        },
    ),
    (RunAttached, {"backfill_id": 7, "ledger_run_id": 9}),
    (
        RepairBreachOut,
        {
            "kind": "silent_change",
            "subject": "orders/2026-03-15T05:00:00+00:00",
            "detail": "3 rows became 4",
            "facts": {"before": {"count": 3}, "after": {"count": 4}},
            "first_seen": T0,
            "last_seen": T0,
            "active": True,
        },
    ),
    (JudgedOut, {"stalled": ["orders"], "ledger_windows": 1, "silent_changes": 0}),
]


@pytest.mark.parametrize(("model", "row"), CASES, ids=[m.__name__ for m, _ in CASES])
def test_the_model_writes_the_bytes_the_dict_wrote(
    model: type[BaseModel], row: dict[str, Any]
) -> None:
    untyped = json.dumps(jsonable_encoder(row))
    typed = json.dumps(model.model_validate(row).model_dump(mode="json", by_alias=True))
    assert typed == untyped
    assert "T05:00:00.123456+00:00" in typed or model in (ReadsRecorded, RunAttached, JudgedOut)
