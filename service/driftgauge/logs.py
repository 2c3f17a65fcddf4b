"""Structured JSON logs with the check, run id and request id bound as context."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

_context: ContextVar[dict[str, Any] | None] = ContextVar("driftgauge_log_context", default=None)
# Attributes every LogRecord has; anything else on a record came from `extra=`. uvicorn
# adds `color_message`, the message again with ANSI colour codes: never ours to print.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}
FORMATS = ("json", "text")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    """Return the bound context and the record's `extra=` fields."""
    out = bound()
    for key, value in vars(record).items():
        if key not in _STANDARD and not key.startswith("_"):
            out[key] = value
    return out


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Bind fields (check, run_id, request_id, …) to every log line inside the block."""
    current = _context.get() or {}
    token = _context.set({**current, **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def bound() -> dict[str, Any]:
    """Return the fields bound by the enclosing log_context blocks."""
    return dict(_context.get() or {})


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as a JSON line with its bound context and extras."""
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info and record.exc_info[0] is not None:
            out["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
            # Only unexpected failures log with exc_info; their stack is for the operator.
            out["stack"] = self.formatException(record.exc_info)
        # ASCII only: a request path may hold U+0085 or U+2028, which some readers split on.
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """Format a record as one readable line: time, level, logger, message, key=value."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as a text line, its stack (if any) on the lines below."""
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        fields = " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in _extras(record).items())
        line = f"{ts} {record.levelname:<7} {record.name}: {record.getMessage()}"
        line = f"{line} {fields}" if fields else line
        if record.exc_info and record.exc_info[0] is not None:
            line += "\n" + self.formatException(record.exc_info)
        return line


# Client libraries whose own lines during an outage are noise beside ours: one line each,
# no stack, at WARNING at most (our run and request lines say what failed and why).
QUIET_LIBRARIES = ("opensearch", "asyncpg", "urllib3", "httpx", "httpcore", "elastic_transport")


class QuietLibraries(logging.Filter):
    """Fold a client library's traceback into its one line and cap its level at WARNING."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite library records in place; keep every record."""
        if record.name.split(".", 1)[0] not in QUIET_LIBRARIES:
            return True
        if record.exc_info and record.exc_info[0] is not None:
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {exc})"
            record.args = None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        if record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def configure(level: str = "INFO", fmt: str = "json") -> None:
    """Send every logger (ours, uvicorn's, APScheduler's) to stderr as JSON or text lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(QuietLibraries())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "apscheduler"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
        # uvicorn.Config(log_level=...) sets these loggers' own levels: follow the root's.
        lg.setLevel(logging.NOTSET)
    # APScheduler logs every job execution and opensearch-py every request at INFO; our own
    # run and request lines say more.
    for name in ("apscheduler", "opensearch"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
