"""JSON log lines carry the bound check, run id and request id."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from driftgauge.config import load_text
from driftgauge.logs import JsonFormatter, configure, log_context
from driftgauge.runner import full_window, recent_window


def _format(record: logging.LogRecord) -> dict[str, object]:
    out: dict[str, object] = json.loads(JsonFormatter().format(record))
    return out


def test_bound_context_and_extras_land_in_each_line() -> None:
    logger = logging.getLogger("driftgauge.test")
    with log_context(check="reviews", run_id=7), log_context(request_id="abc"):
        record = logger.makeRecord("driftgauge.test", logging.INFO, __file__, 1, "run %s", ("x",),
                                   None, extra={"status": "drift"})
        line = _format(record)
    assert line["msg"] == "run x" and line["level"] == "info"
    assert (line["check"], line["run_id"], line["request_id"], line["status"]) == (
        "reviews", 7, "abc", "drift")
    outside = _format(logger.makeRecord("driftgauge.test", logging.INFO, __file__, 1, "m", (),
                                        None))
    assert "check" not in outside


def test_windows_are_whole_local_days_up_to_now() -> None:
    cfg = load_text("""
stores:
  s: {kind: postgres, dsn: "postgresql://x@h/x"}
  r: {kind: opensearch, url: "http://h:9200"}
state: {dsn: "postgresql://x@h/x"}
checks:
  c:
    source: {store: s, table: t, key: k, time: ts}
    reader: {store: r, index: i, key: k, time: ts}
    timezone: America/New_York
    schedule: {recent: {every: 1h, days: 3}, full: {every: 1d, days: 30}}
""")
    check = cfg.checks["c"]
    now = datetime(2026, 3, 10, 3, 0, tzinfo=UTC)  # still March 9 in New York
    start, end = recent_window(check, now)
    assert end == now
    assert start.isoformat() == "2026-03-07T00:00:00-05:00"
    full_start, _ = full_window(check, now)
    assert full_start.date().isoformat() == "2026-02-08"


def test_client_libraries_log_one_line_without_a_stack(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure("INFO")
        try:
            raise ConnectionRefusedError("connect call failed ('127.0.0.1', 9250)")
        except ConnectionRefusedError:
            logging.getLogger("opensearch").warning("GET / [status:N/A]", exc_info=True)
            logging.getLogger("asyncpg.pool").error("could not reconnect", exc_info=True)
            logging.getLogger("driftgauge.mine").error("ours keeps its stack", exc_info=True)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines()]
    assert [x["logger"] for x in lines] == ["opensearch", "asyncpg.pool", "driftgauge.mine"]
    for line in lines[:2]:
        assert line["level"] == "warning" and "stack" not in line
        assert "ConnectionRefusedError: connect call failed" in line["msg"]
    assert "Traceback" in lines[2]["stack"]
