"""Retries of store reads made by this process, by store and reason (for /metrics)."""

from __future__ import annotations

import threading
from collections import Counter

REASONS = ("throttled", "unavailable", "connection", "unreadable")
"""Why a read was retried: a 429; a 502, 503 or 504; a reset or refused connection; a cut body."""

_lock = threading.Lock()
_retries: Counter[tuple[str, str]] = Counter()


def count(store: str, reason: str) -> None:
    """Count one retry of a read on `store`."""
    with _lock:
        _retries[(store, reason)] += 1


def retry_counts() -> dict[tuple[str, str], int]:
    """Return retries made by this process so far, by (store, reason)."""
    with _lock:
        return dict(_retries)
