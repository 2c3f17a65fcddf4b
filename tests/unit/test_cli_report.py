"""`driftgauge check --json` says what the text says; every CLI argument says what it is."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from driftgauge.cli import _parser
from driftgauge.cli.render import render_run
from driftgauge.cli.report import run_report
from driftgauge.engine.result import BucketResult, KeyDiff, RunResult

DAY = datetime(2026, 3, 8, tzinfo=UTC)


def _parsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [p]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _parsers(sub)
    return out


def test_every_argument_of_every_command_has_help() -> None:
    missing = [
        (sp.prog, a.dest)
        for sp in _parsers(_parser())
        for a in sp._actions
        if not (a.help and a.help.strip())
    ]
    assert missing == []
    # And every command too, as `driftgauge -h` lists them.
    for sp in _parsers(_parser()):
        for action in sp._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help for c in action._choices_actions}
                assert set(helps) == set(action.choices) and all(helps.values()), sp.prog


def _drifting() -> RunResult:
    drift = BucketResult(
        start=DAY,
        status="drift",
        expected=10,
        visible=9,
        missing=1,
        extra=1,
        mismatched=1,
        duplicates=1,
        excluded={"no_join_key": 2},
        reasons=["1 missing, 1 extra, 1 mismatched"],
        samples=[
            KeyDiff("k1", "missing", 1, 0, DAY + timedelta(hours=1)),
            KeyDiff("k2", "mismatched", 1, 2),
        ],
    )
    settling = BucketResult(start=DAY + timedelta(days=1), status="settling", expected=5, visible=1)
    run = RunResult(
        "reviews",
        DAY,
        DAY + timedelta(days=2),
        started_at=DAY,
        buckets=[drift, settling],
        queries=7,
        rows_fetched=20,
    )
    run.run_id = 41
    return run


def test_json_carries_the_run_id_samples_reasons_and_totals_of_the_text() -> None:
    run = _drifting()
    text = render_run(run)
    out = run_report(run)
    assert out["run_id"] == 41 and out["status"] == "drift"
    day = out["buckets"][0]
    assert day["samples"] == [
        {
            "key": "k1",
            "kind": "missing",
            "source_copies": 1,
            "reader_copies": 0,
            "event_time": (DAY + timedelta(hours=1)).isoformat(),
        },
        {
            "key": "k2",
            "kind": "mismatched",
            "source_copies": 1,
            "reader_copies": 2,
            "event_time": None,
        },
    ]
    assert day["reasons"] == ["1 missing, 1 extra, 1 mismatched"]
    for sample in day["samples"]:
        assert f"{sample['kind']:<10} {sample['key']}" in text
    # The totals row of the table leaves the settling day out; so does the JSON.
    assert out["totals"] == {
        "expected": 10,
        "visible": 9,
        "missing": 1,
        "extra": 1,
        "mismatched": 1,
        "duplicates": 1,
        "excluded": 2,
    }
    [row] = [line.split() for line in text.splitlines() if line.startswith("total")]
    totals = out["totals"]
    assert row == [
        "total",
        *(
            str(totals[c])
            for c in ("expected", "excluded", "visible", "missing", "extra", "mismatched")
        ),
        out["status"],
    ]
    assert out["bucket_statuses"] == {"ok": 0, "drift": 1, "settling": 1, "error": 0}
    assert (out["queries"], out["rows_fetched"]) == (7, 20)


def test_json_names_nothing_judged_and_the_store_that_failed() -> None:
    settling = BucketResult(start=DAY, status="settling", expected=3, visible=3)
    idle = RunResult("reviews", DAY, DAY + timedelta(days=1), started_at=DAY, buckets=[settling])
    out = run_report(idle)
    assert out["status"] == "nothing_judged" and out["bucket_statuses"]["settling"] == 1
    assert out["totals"]["expected"] == 0 and out["run_id"] is None
    failed = RunResult(
        "reviews",
        DAY,
        DAY + timedelta(days=1),
        started_at=DAY,
        error="StoreUnavailable: search: connection refused",
        failed_store="search",
    )
    out = run_report(failed)
    assert (out["status"], out["failed_store"]) == ("error", "search")
    assert out["error"] == "StoreUnavailable: search: connection refused"
