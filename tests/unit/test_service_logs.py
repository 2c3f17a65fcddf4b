"""JSON log lines carry the bound check, run id and request id."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from driftgauge.configfile.loader import load_text
from driftgauge.jobs.windows import full_window, recent_window
from driftgauge.logs import JsonFormatter, configure, log_context

from .config_text import config_head


def _format(record: logging.LogRecord) -> dict[str, object]:
    out: dict[str, object] = json.loads(JsonFormatter().format(record))
    return out


def test_bound_context_and_extras_land_in_each_line() -> None:
    logger = logging.getLogger("driftgauge.test")
    with log_context(check="reviews", run_id=7), log_context(request_id="abc"):
        record = logger.makeRecord(
            "driftgauge.test",
            logging.INFO,
            __file__,
            1,
            "run %s",
            ("x",),
            None,
            extra={"status": "drift"},
        )
        line = _format(record)
    assert line["msg"] == "run x" and line["level"] == "info"
    assert (line["check"], line["run_id"], line["request_id"], line["status"]) == (
        "reviews",
        7,
        "abc",
        "drift",
    )
    outside = _format(
        logger.makeRecord("driftgauge.test", logging.INFO, __file__, 1, "m", (), None)
    )
    assert "check" not in outside


def test_windows_are_whole_local_days_up_to_now() -> None:
    cfg = load_text(
        config_head(s="postgres", r="opensearch")
        + """
  c:
    source: {store: s, table: t, key: k, time: ts}
    reader: {store: r, index: i, key: k, time: ts}
    timezone: America/New_York
    schedule: {recent: {every: 1h, days: 3}, full: {every: 1d, days: 30}}
"""
    )
    check = cfg.checks["c"]
    now = datetime(2026, 3, 10, 3, 0, tzinfo=UTC)  # still March 9 in New York
    start, end = recent_window(check, now)
    assert end == now
    assert start.isoformat() == "2026-03-07T00:00:00-05:00"
    full_start, _ = full_window(check, now)
    assert full_start.date().isoformat() == "2026-02-08"


def test_client_libraries_log_one_line_without_a_stack(capsys: pytest.CaptureFixture[str]) -> None:
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


def _configured_lines(
    capsys: pytest.CaptureFixture[str], fmt: str, level: str, emit: Callable[[], None]
) -> list[str]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure(level, fmt)
        emit()
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    return capsys.readouterr().err.splitlines()


def test_uvicorn_colour_codes_never_reach_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    def emit() -> None:
        # What uvicorn logs at start-up: the message again, coloured, as an extra.
        logging.getLogger("uvicorn.error").info(
            "Uvicorn running on %s",
            "http://0.0.0.0:8080",
            extra={"color_message": "Uvicorn running on \x1b[1m%s\x1b[0m"},
        )

    # An in-process uvicorn.Config(log_level="warning") earlier must not hide uvicorn's lines.
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    [line] = _configured_lines(capsys, "json", "INFO", emit)
    assert "\\u001b" not in line and "\x1b" not in line
    parsed = json.loads(line)
    assert "color_message" not in parsed
    assert parsed["msg"] == "Uvicorn running on http://0.0.0.0:8080"


def test_text_format_is_one_readable_line_with_the_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def emit() -> None:
        with log_context(check="reviews"):
            logging.getLogger("driftgauge.runner").warning(
                "run finished", extra={"store": "search", "color_message": "\x1b[31mx"}
            )
        logging.getLogger("driftgauge.runner").debug("hidden below the level")

    [line] = _configured_lines(capsys, "text", "WARNING", emit)
    assert "WARNING driftgauge.runner: run finished" in line
    assert 'check="reviews"' in line and 'store="search"' in line
    assert "\x1b" not in line and "color_message" not in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_serve_takes_the_log_options_from_arguments_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from driftgauge.cli import _parser

    args = _parser().parse_args(["serve", "--log-level", "debug", "--log-format", "text"])
    assert (args.log_level, args.log_format) == ("DEBUG", "text")
    assert (
        _parser().parse_args(["serve"]).log_level,
        _parser().parse_args(["serve"]).log_format,
    ) == ("INFO", "json")
    monkeypatch.setenv("DRIFTGAUGE_LOG_LEVEL", "warning")
    monkeypatch.setenv("DRIFTGAUGE_LOG_FORMAT", "text")
    args = _parser().parse_args(["serve"])
    assert (args.log_level, args.log_format) == ("WARNING", "text")


def test_a_bad_log_level_from_the_environment_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from driftgauge.cli import main

    monkeypatch.setenv("DRIFTGAUGE_LOG_LEVEL", "loud")
    assert main(["serve", "--config", "/nonexistent.yml"]) == 2
    err = capsys.readouterr().err
    assert "DRIFTGAUGE_LOG_LEVEL" in err and "'LOUD'" in err and "Traceback" not in err


async def test_probe_and_scrape_lines_are_debug_everything_else_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from driftgauge.api.middleware import RequestContext

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        status = 503 if scope["path"] == "/readyz" and b"down" in scope["query_string"] else 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"x"})

    transport = httpx.ASGITransport(app=RequestContext(app))
    with caplog.at_level(logging.DEBUG, "driftgauge.api"):
        async with httpx.AsyncClient(transport=transport, base_url="http://dg") as client:
            for path in ("/healthz", "/readyz", "/metrics", "/api/v1/checks", "/readyz?down"):
                await client.get(path)
    levels = [
        (r.__dict__["path"], r.__dict__["status"], r.levelname)
        for r in caplog.records
        if r.getMessage() == "request"
    ]
    assert levels == [
        ("/healthz", 200, "DEBUG"),
        ("/readyz", 200, "DEBUG"),
        ("/metrics", 200, "DEBUG"),
        ("/api/v1/checks", 200, "INFO"),
        ("/readyz", 503, "INFO"),
    ]
