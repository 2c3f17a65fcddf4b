"""Every digest difference is explained: a drill-down whose found rows do not add up to the
aggregates' gap ends `error` / unexplained_difference, never ok (in-memory stores)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from driftgauge.engine.result import RunResult
from driftgauge.stores.base import BucketDigest, Granularity, RowHash
from driftgauge.stores.memory import MemoryAdapter

from .corrupting import DropOneRow
from .engine_helpers import BASE, between, changed, day_rows, key_of, make_check, row


def _small() -> tuple[list[RowHash], list[RowHash], str]:
    src = day_rows(0, 30)
    return src, src[1:], key_of(src[5])  # leaf: the whole day's rows


def _slots() -> tuple[list[RowHash], list[RowHash], str]:
    src = day_rows(0, 2400)
    return src, changed(src, 100), key_of(src[100])  # one differing slot


def _hours() -> tuple[list[RowHash], list[RowHash], str]:
    src = day_rows(0, 2400)
    return src, [*src, src[100]], key_of(src[100])  # a key twice: hours, prefixes


def _one_timestamp() -> tuple[list[RowHash], list[RowHash], str]:
    src = [row(f"batch-{i}", BASE + timedelta(hours=2)) for i in range(600)]
    return src, changed(src, 123), "batch-123"  # slot too big: prefixes


def _dense() -> tuple[list[RowHash], list[RowHash], str]:
    src = day_rows(0, 1000)
    return src, src[:500], key_of(src[10])  # dense: straight to rows


def _spread() -> tuple[list[RowHash], list[RowHash], str]:
    src = day_rows(0, 2400)
    rdr = [*src, *(src[i] for i in range(0, 2400, 150))]  # copies in many hours
    return src, rdr, key_of(src[300])


SCENARIOS = {
    "small": _small,
    "slots": _slots,
    "hours": _hours,
    "one_timestamp": _one_timestamp,
    "dense": _dense,
    "spread": _spread,
}


async def _run(
    src: list[RowHash], rdr: list[RowHash], *, drop: str | None = None, side: str = "reader"
) -> tuple[RunResult, DropOneRow | None]:
    check = make_check(drilldown="{leaf_rows: 50, max_depth: 4}")
    source: MemoryAdapter | DropOneRow = MemoryAdapter(src)
    reader: MemoryAdapter | DropOneRow = MemoryAdapter(rdr)
    wrapper = None
    if drop is not None:
        if side == "source":
            source = wrapper = DropOneRow(source, drop)
        else:
            reader = wrapper = DropOneRow(reader, drop)
    result = await between(check, source, reader)
    return result, wrapper


@pytest.mark.parametrize("name", SCENARIOS)
async def test_an_honest_drill_down_is_explained(name: str) -> None:
    src, rdr, _ = SCENARIOS[name]()
    result, _ = await _run(src, rdr)
    (b,) = result.buckets
    assert b.status == "drift", b.reasons
    assert not any("unexplained" in r for r in b.reasons)


@pytest.mark.parametrize("side", ["source", "reader"])
@pytest.mark.parametrize("name", SCENARIOS)
async def test_a_row_dropped_from_a_leaf_is_unexplained(name: str, side: str) -> None:
    src, rdr, key = SCENARIOS[name]()
    result, wrapper = await _run(src, rdr, drop=key, side=side)
    assert wrapper is not None and wrapper.dropped == 1
    (b,) = result.buckets
    assert b.status == "error", (b.status, b.reasons)
    assert b.reasons[0].startswith("unexplained_difference: ")
    assert result.status == "error"


async def test_a_clean_day_with_a_dropped_row_is_never_ok() -> None:
    # The aggregates agree, so nothing is fetched: nothing to explain, rightly ok.
    src = day_rows(0, 100)
    result, wrapper = await _run(src, list(src), drop=src[3].key)
    assert wrapper is not None and wrapper.dropped == 0
    assert result.buckets[0].status == "ok"


async def test_ledger_excused_rows_are_accounted_for() -> None:
    src = day_rows(0, 100)
    check = make_check()
    ledger = {key_of(r): "no_document" for r in src[:2]}
    result = await between(
        check, MemoryAdapter(src), MemoryAdapter(src[3:]), ledger_excluded=ledger
    )
    b = result.buckets[0]
    assert b.excluded == {"no_document": 2} and b.missing == 1
    assert b.status == "drift" and not any("unexplained" in r for r in b.reasons)


class HidesACopy(MemoryAdapter):
    """A store whose day aggregate counts one key fewer than its rows and prefixes hold."""

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        out = await super().bucket_digests(start, end, granularity)
        if granularity != "day":
            return out
        return [replace(b, agg=replace(b.agg, distinct_keys=b.agg.distinct_keys - 1)) for b in out]


async def test_copies_the_rows_do_not_hold_are_unexplained() -> None:
    # The day says some key is held twice; no prefix or row says so: never `ok`.
    src = day_rows(0, 300)
    check = make_check(drilldown="{leaf_rows: 50, max_depth: 4}")
    result = await between(check, HidesACopy(src), MemoryAdapter(list(src)))
    (b,) = result.buckets
    assert b.status == "error", (b.status, b.reasons)
    assert any(
        r.startswith("unexplained_difference: day: the source holds 1 extra") for r in b.reasons
    ), b.reasons
