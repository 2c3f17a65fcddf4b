"""Ledger payloads: bad ones name the field; the client cuts outcomes into numbered batches."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from pydantic import ValidationError

from driftgauge.configfile.loader import load_text
from driftgauge.ledger.client import LedgerClientError, SyncLedgerClient, _Outbox
from driftgauge.ledger.hooks import ReconcileOnClose
from driftgauge.ledger.models import Batch, Counts, RunOpen, RunOut

from .config_text import config_head

T0 = datetime(2024, 5, 6, tzinfo=UTC)


def locs(exc: ValidationError) -> list[tuple[object, ...]]:
    return [tuple(e["loc"]) for e in exc.errors()]


def test_outcome_details_are_required_and_named() -> None:
    with pytest.raises(ValidationError) as err:
        Batch.model_validate(
            {
                "batch_id": "b1",
                "keys": [
                    {"key": "t1", "outcome": "written"},
                    {"key": "t2", "outcome": "no_match"},
                    {"key": "t3", "outcome": "failed", "reason": "oops"},
                    {"key": "t4", "outcome": "written", "error": "TimeoutError"},
                ],
            }
        )
    assert locs(err.value) == [
        ("keys", 1, "reason"),
        ("keys", 2, "reason"),
        ("keys", 2, "error"),
        ("keys", 3, "error"),
    ]


def test_batches_need_content_and_forbid_unknown_keys() -> None:
    with pytest.raises(ValidationError, match="at least one entry"):
        Batch.model_validate({"batch_id": "b1"})
    with pytest.raises(ValidationError) as err:
        Batch.model_validate(
            {"batch_id": "b1", "counts": [{"outcome": "written", "count": 0}], "colour": "red"}
        )
    assert set(locs(err.value)) == {("counts", 0, "count"), ("colour",)}


def test_a_run_window_must_end_after_it_starts() -> None:
    with pytest.raises(ValidationError) as err:
        RunOpen.model_validate(
            {
                "job": "j",
                "window_start": T0.isoformat(),
                "window_end": T0.isoformat(),
                "input_rows": -1,
            }
        )
    assert set(locs(err.value)) == {("window_end",), ("input_rows",)}
    with pytest.raises(ValidationError) as err:
        RunOpen.model_validate(
            {
                "job": "j",
                "window_start": "2024-05-06T00:00:00",
                "window_end": "2024-05-07T00:00:00Z",
                "input_rows": 1,
            }
        )
    assert locs(err.value) == [("window_start",)]


def test_fingerprint_and_totals() -> None:
    a = Batch.model_validate(
        {
            "batch_id": "b1",
            "keys": [
                {"key": "t1", "outcome": "written"},
                {"key": "t2", "outcome": "no_match", "reason": "no_document"},
            ],
            "counts": [{"outcome": "written", "count": 5}],
        }
    )
    b = Batch.model_validate(a.model_dump())
    assert a.fingerprint() == b.fingerprint()
    assert a.totals() == {("written", ""): 6, ("no_match", "no_document"): 1}
    changed = a.model_copy(update={"batch_id": "b2"})
    assert changed.fingerprint() != a.fingerprint()


def test_outbox_numbers_batches_and_tallies_outcomes() -> None:
    box = _Outbox("run-x", batch_size=2)
    box.add_keys("written", ["a", "b", "c"])
    box.add_keys("no_match", {"d": "no_document"})
    box.add_count("skipped", 10, "no_join_key")
    assert box.tally == Counts(written=3, no_match=1, skipped=10)
    assert box.full()
    first, second = box.take(), box.take()
    assert first is not None and second is not None and box.take() is None
    assert [first["batch_id"], second["batch_id"]] == ["run-x-000001", "run-x-000002"]
    assert len(first["keys"]) == 2 and first["counts"] == [
        {"outcome": "skipped", "count": 10, "reason": "no_join_key"}
    ]
    assert second["keys"][-1] == {"key": "d", "outcome": "no_match", "reason": "no_document"}


CONFIG = (
    config_head(db="postgres", os="opensearch")
    + """
  reviews:
    source: {store: db, table: tasks, key: task_id, time: ts}
    reader: {store: os, index: conv, key: task_id, time: ts}
    timezone: Europe/Berlin
    ledger: {job: review-sync, settle: 20m}
  other:
    source: {store: db, table: tasks, key: task_id, time: ts}
    reader: {store: os, index: conv, key: task_id, time: ts}
"""
)


async def test_a_closed_run_schedules_one_reconcile_of_its_days_after_the_settle() -> None:
    checks = load_text(CONFIG).checks
    now = [datetime(2024, 5, 7, 0, 5, tzinfo=UTC)]
    done: list[tuple[str, datetime, datetime]] = []

    async def reconcile(check: str, start: datetime, end: datetime) -> None:
        done.append((check, start, end))

    hook = ReconcileOnClose(checks, reconcile, clock=lambda: now[0])
    run = RunOut(
        id=1,
        job="review-sync",
        client_run_id=None,
        window_start=datetime(2024, 5, 5, 22, tzinfo=UTC),
        window_end=datetime(2024, 5, 6, 22, tzinfo=UTC),
        window_day=datetime(2024, 5, 6).date(),
        input_rows=1,
        opened_at=now[0],
        closed_at=now[0],
        status="success",
        outcomes=Counts(written=1),
    )
    await hook(run)
    await hook(run.model_copy(update={"id": 2}))  # a second run of the window coalesces
    assert len(hook.pending) == 1
    assert await hook.run_due(now[0] + timedelta(minutes=19)) == []
    assert done == []
    due = await hook.run_due(now[0] + timedelta(minutes=20))
    assert len(due) == 1 and hook.pending == []
    check, start, end = done[0]
    assert check == "reviews"
    # Local Berlin days 2024-05-06 (the run's window) → [05-06 00:00, 05-07 00:00) local.
    assert (start.isoformat(), end.isoformat()) == (
        "2024-05-06T00:00:00+02:00",
        "2024-05-07T00:00:00+02:00",
    )


def test_sync_client_retries_with_the_same_batch_id_and_a_crash_sends_no_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    monkeypatch.setattr("driftgauge.ledger.client.time.sleep", lambda s: None)
    seen: list[tuple[str, dict[str, object]]] = []
    failures = {"batch": 1}

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        if request.url.path.endswith("/batches") and failures["batch"]:
            failures["batch"] -= 1
            return httpx.Response(503, json={"detail": "state database unavailable"})
        return httpx.Response(200, json={"id": 7, **body})

    transport = httpx.MockTransport(handle)
    args = {
        "job": "review-sync",
        "window_start": T0,
        "window_end": T0 + timedelta(days=1),
        "transport": transport,
        "client_run_id": "r1",
    }
    with SyncLedgerClient("http://dg", input_rows=2, **args) as run:  # type: ignore[arg-type]
        run.written(["a"])
        run.no_match({"b": "no_document"})
    paths = [p for p, _ in seen]
    assert paths == [
        "/api/v1/ledger/runs",
        "/api/v1/ledger/runs/7/batches",
        "/api/v1/ledger/runs/7/batches",
        "/api/v1/ledger/runs/7/close",
    ]
    assert seen[1][1] == seen[2][1] and seen[1][1]["batch_id"] == "r1-000001"
    assert seen[3][1]["status"] == "success"
    seen.clear()
    with (
        pytest.raises(RuntimeError),
        SyncLedgerClient("http://dg", input_rows=5, **args) as crashed,  # type: ignore[arg-type]
    ):
        crashed.written(["a"])
        raise RuntimeError("killed")
    assert [p for p, _ in seen] == ["/api/v1/ledger/runs", "/api/v1/ledger/runs/7/batches"]


def test_client_errors_name_the_request() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"detail": [{"loc": ["body", "job"], "msg": "unknown"}]})

    with (
        pytest.raises(LedgerClientError, match="open the run: HTTP 422"),
        SyncLedgerClient(
            "http://dg",
            job="nightly",
            window_start=T0,
            window_end=T0 + timedelta(days=1),
            input_rows=1,
            transport=httpx.MockTransport(refuse),
        ),
    ):
        pass
