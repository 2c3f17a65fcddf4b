"""Builders for engine unit tests: a check, and rows hashed like a store would."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import StateError
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.state.codec import StoredBucket
from driftgauge.stores.base import RowHash, StoreAdapter

from .config_text import config_head

BASE = datetime(2026, 3, 1, tzinfo=UTC)
NOW = BASE + timedelta(days=30)

CHECK = """
  reviews:
    source: {store: src, table: tasks, key: task_id, time: completed_at}
    reader: {store: dst, index: conversations, key: task_id, time: completed_at}
    fields: {label: string}
    timezone: {tz}
    settle: {settle}
    exclusions:
      - {reason: no_join_key, where: "conversation_key IS NULL"}
    tolerance: {tolerance}
    drilldown: {drilldown}
"""


def check_text(
    tz: str = "UTC",
    settle: str = "2h",
    tolerance: str = "{}",
    drilldown: str = "{leaf_rows: 50}",
    **stores: str,
) -> str:
    """Return the config text of the `reviews` check, over `stores` (name=kind, as config_head)."""
    body = (
        CHECK.replace("{tz}", tz)
        .replace("{settle}", settle)
        .replace("{tolerance}", tolerance)
        .replace("{drilldown}", drilldown)
    )
    return config_head(**(stores or {"src": "postgres", "dst": "opensearch"})) + body


def make_check(
    tz: str = "UTC", settle: str = "2h", tolerance: str = "{}", drilldown: str = "{leaf_rows: 50}"
) -> Check:
    """Return a check built through the real config loader."""
    return load_text(check_text(tz, settle, tolerance, drilldown)).checks["reviews"]


async def between(
    check: Check,
    source: StoreAdapter,
    reader: StoreAdapter,
    days: int = 1,
    *,
    now: datetime = NOW,
    **kw: Any,
) -> RunResult:
    """Reconcile `days` whole days from BASE between two adapters, as of `now`."""
    return await reconcile(check, source, reader, BASE, BASE + timedelta(days=days), now=now, **kw)


def row(key: str, when: datetime, label: str = "ok") -> RowHash:
    """Return a row whose hashes are derived from its key and label."""
    key_hash = hashlib.md5(key.encode()).hexdigest()
    row_hash = int.from_bytes(hashlib.md5(f"{key}\x00{label}".encode()).digest()[:8], "big")
    return RowHash(key, key_hash, row_hash, when)


def key_of(r: RowHash) -> str:
    """Return the key of a row built here; these builders never make a NULL key."""
    assert r.key is not None
    return r.key


def relabel(r: RowHash, label: str = "changed") -> RowHash:
    """Return the same key and time with different content."""
    return row(key_of(r), r.event_time, label)


def changed(rows: list[RowHash], *at: int, label: str = "changed") -> list[RowHash]:
    """Return a copy of `rows` whose rows at the indexes `at` have other content."""
    out = list(rows)
    for i in at:
        out[i] = relabel(out[i], label)
    return out


def day_rows(day: int, n: int, prefix: str = "t") -> list[RowHash]:
    """Return n rows spread over the hours of day `day` after BASE."""
    start = BASE + timedelta(days=day)
    return [row(f"{prefix}{day}-{i}", start + timedelta(seconds=i * 86400 // n)) for i in range(n)]


class Costs:
    """The state store's measured store costs, as the planner reads them."""

    def __init__(self, measured: dict[str, float] | None = None, fail: bool = False) -> None:
        self.measured = measured or {}
        self.fail = fail

    async def digest_pass(self, stores: list[str]) -> dict[str, float]:
        if self.fail:
            raise StateError("state database down")
        return {s: v for s, v in self.measured.items() if s in stores}


class History:
    """A state store's stored day verdicts and store costs, as the planner reads them."""

    def __init__(
        self, buckets: list[BucketResult], fail: bool = False, costs: Costs | None = None
    ) -> None:
        self.buckets = buckets
        self.fail = fail
        self.costs = costs or Costs()

    async def day_buckets(self, *_: object) -> list[StoredBucket]:
        if self.fail:
            raise StateError("state database down")
        return [StoredBucket(1, NOW, b) for b in self.buckets]
