"""Rows scanned per run and per store: the load a check puts on its stores (issue: source load)."""

from __future__ import annotations

from driftgauge import observe
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import between, changed, day_rows, make_check


def scanned(store: str) -> dict[str, int]:
    """Return the process's rows-scanned counters of one store, by operation."""
    return {op: n for (s, op), n in observe.ROWS_SCANNED.snapshot().items() if s == store}


async def test_a_healthy_run_scans_each_row_once_per_side_whether_slots_come_or_not() -> None:
    rows = day_rows(0, 300) + day_rows(1, 200)
    before_src, before_dst = scanned("src"), scanned("dst")
    for slots_first in (False, True):
        result = await between(
            make_check(),
            MemoryAdapter(list(rows)),
            MemoryAdapter(list(rows)),
            2,
            first=FirstPass(slots=slots_first),
        )
        assert result.status == "ok"
        # The first pass's slots come from the day scan: no row counts twice.
        assert result.rows_scanned == 2 * 500
        assert result.to_dict()["rows_scanned"] == 1000
    assert scanned("src")["digests"] - before_src.get("digests", 0) == 1000
    assert scanned("dst")["digests"] - before_dst.get("digests", 0) == 1000


async def test_drift_adds_the_rows_of_each_drill_query_and_the_exported_rows() -> None:
    src = day_rows(0, 2400)
    rdr = changed(src, 100)
    before = scanned("dst")
    check = make_check(drilldown="{leaf_rows: 50, max_depth: 4}")
    result = await between(check, MemoryAdapter(src), MemoryAdapter(rdr))
    assert result.buckets[0].mismatched == 1
    after = scanned("dst")
    grew = {op: after.get(op, 0) - before.get(op, 0) for op in observe.SCANS}
    assert grew["digests"] == 2400
    # The drill reads the day's slots again (a second scan), then a few rows of one slot.
    assert grew["slots"] == 2400 and 0 < grew["rows"] < 10
    assert result.rows_scanned == 2 * sum(grew.values())
    assert result.rows_fetched == 2 * grew["rows"]


async def test_excluded_source_rows_count_as_scanned() -> None:
    rows = day_rows(0, 100)
    dropped = [(r.event_time, "no_join_key") for r in rows[:7]]
    src = MemoryAdapter(list(rows), excluded=dropped)
    result = await between(make_check(), src, MemoryAdapter(list(rows)))
    assert result.rows_scanned == 100 + 7 + 100


async def test_a_difference_digest_first_pass_counts_its_rows() -> None:
    rows = day_rows(0, 300) + day_rows(1, 200)
    before = scanned("dst")
    result = await between(
        make_check(),
        DigestMemoryAdapter(list(rows)),
        DigestMemoryAdapter(list(rows)),
        2,
        first=FirstPass(width=32),
    )
    assert result.status == "ok" and result.queries == 2
    assert result.rows_scanned == 2 * 500
    assert scanned("dst")["digests"] - before.get("digests", 0) == 500
