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
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


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
        out.update(bound())
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            out["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
            # Only unexpected failures log with exc_info; their stack is for the operator.
            out["stack"] = self.formatException(record.exc_info)
        # ASCII only: a request path may hold U+0085 or U+2028, which some readers split on.
        return json.dumps(out, default=str)


def configure(level: str = "INFO") -> None:
    """Send every logger (ours, uvicorn's, APScheduler's) to stderr as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "apscheduler"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    # APScheduler logs every job execution and opensearch-py every request at INFO; our own
    # run and request lines say more.
    for name in ("apscheduler", "opensearch"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
