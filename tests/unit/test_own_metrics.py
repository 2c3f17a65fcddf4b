"""Store-call and run-duration series of this process, against docs/metrics.md."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftgauge import observe
from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import (
    IncompleteExport,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import RunResult
from driftgauge.metrics.collector import build_registry
from driftgauge.metrics.own import own_part
from driftgauge.slots import store_slot
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import MemoryAdapter

from .config_text import config_head
from .metrics_doc import documented_rows, labels_and_values

DAY = datetime(2026, 3, 8, tzinfo=UTC)
CONFIG = (
    config_head(warehouse="postgres", search="opensearch")
    + """
  c:
    source: {store: warehouse, table: t, key: k, time: ts}
    reader: {store: search, index: i, key: k, time: ts}
    settle: 0s
"""
)


def _rows(n: int) -> list[RowHash]:
    return [RowHash(f"k{i}", f"{i:016x}", i + 1, DAY + timedelta(minutes=i)) for i in range(n)]


async def _one_day(check: Check, source: MemoryAdapter, reader: MemoryAdapter) -> RunResult:
    """Reconcile DAY, settled a day since, between the two adapters."""
    return await reconcile(
        check, source, reader, DAY, DAY + timedelta(days=1), now=DAY + timedelta(days=2)
    )


def test_error_kinds_follow_the_exception_tree() -> None:
    assert observe.error_kind(StoreTimeout("s", "x")) == "timeout"
    assert observe.error_kind(StoreUnavailable("s", "x")) == "unavailable"
    assert observe.error_kind(StorePermissionError("s", "x")) == "permission"
    assert observe.error_kind(StoreQueryError("s", "x")) == "query"
    assert observe.error_kind(IncompleteExport("s", "x")) == "query"


def test_histogram_bounds_are_inclusive_and_cumulative() -> None:
    h = observe.Histogram((1.0, 5.0))
    for v in (0.5, 1.0, 3.0, 9.0):
        h.observe(("a",), v)
    assert h.snapshot() == {("a",): ([2, 3, 4], 13.5)}


def test_a_failed_call_is_timed_and_counted_a_cancelled_one_is_not() -> None:
    store = f"s{id(object())}"
    with pytest.raises(StoreTimeout), observe.store_call(store, "rows"):
        raise StoreTimeout(store, "deadline")
    with pytest.raises(asyncio.CancelledError), observe.store_call(store, "slots"):
        raise asyncio.CancelledError
    assert observe.error_counts()[(store, "timeout")] == 1
    timed = observe.STORE_QUERIES.snapshot()
    assert timed[(store, "rows")][0][-1] == 1
    assert (store, "slots") not in timed


async def test_a_run_times_each_call_under_the_configured_store_names() -> None:
    check = load_text(CONFIG).checks["c"]
    before = observe.STORE_QUERIES.snapshot()
    reader = MemoryAdapter(_rows(99))  # one row missing: a drill-down
    result = await _one_day(check, MemoryAdapter(_rows(100)), reader)
    assert result.status == "drift"
    after = observe.STORE_QUERIES.snapshot()

    def calls(key: tuple[str, str]) -> int:
        return after.get(key, ([0], 0.0))[0][-1] - before.get(key, ([0], 0.0))[0][-1]

    assert calls(("warehouse", "digests")) >= 1 and calls(("search", "digests")) >= 1
    drilled = sum(
        calls((s, op)) for s in ("warehouse", "search") for op in ("slots", "prefixes", "rows")
    )
    assert drilled >= 2
    # Every timed call is one of the run's round trips, and none is left out.
    total = sum(calls((s, op)) for s in ("warehouse", "search") for op in observe.OPERATIONS)
    assert total == result.queries


async def test_a_store_that_is_down_is_counted_and_named_on_the_result() -> None:
    check = load_text(CONFIG).checks["c"]
    before = observe.error_counts().get(("search", "unavailable"), 0)
    reader = MemoryAdapter([], fail_with=StoreUnavailable("search", "connection refused"))
    result = await _one_day(check, MemoryAdapter(_rows(3)), reader)
    assert result.status == "error" and result.failed_store == "search"
    assert observe.error_counts()[("search", "unavailable")] == before + 1


def _documented() -> dict[str, tuple[str, set[str], set[str]]]:
    return {
        name: (kind, *labels_and_values(cell))
        for name, kind, cell in documented_rows(("Stores", "Run durations"))
        if "retries" not in name
    }


def test_exposition_matches_the_documented_stores_and_run_durations_sections() -> None:
    observe.run_finished("c", "recent", 2.0)
    with observe.store_call("warehouse", "digests"):
        pass

    async def take_a_slot() -> None:
        async with store_slot("warehouse", 1):
            pass

    asyncio.run(take_a_slot())
    text = generate_latest(build_registry([own_part(["warehouse", "search"])])).decode()
    seen = {}
    for fam in text_string_to_metric_families(text):
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        labels = set().union(*(set(s.labels) for s in fam.samples)) - {"le"}
        seen[name] = (fam.type, labels)
        assert fam.samples, name
    docs = _documented()
    assert seen == {n: (t, labels) for n, (t, labels, _) in docs.items()}
    assert docs["driftgauge_store_errors_total"][2] == set(observe.ERROR_KINDS)
    assert docs["driftgauge_store_query_duration_seconds"][2] == set(observe.OPERATIONS)
    assert docs["driftgauge_store_rows_scanned_total"][2] == set(observe.SCANS)
    errors = [
        s
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "driftgauge_store_errors_total"
    ]
    # Every kind of every configured store is there from the start.
    assert {(s.labels["store"], s.labels["kind"]) for s in errors} >= {
        (st, k) for st in ("warehouse", "search") for k in observe.ERROR_KINDS
    }
