"""Every kind with difference digests builds, per day, the tables encoding.iblt builds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Protocol

import pytest

from driftgauge.core import buckets
from driftgauge.core.fields import RowHashName
from driftgauge.encoding import iblt
from driftgauge.encoding.digest import epoch_micros
from driftgauge.stores import open_adapter
from driftgauge.stores.base import (
    BucketDigest,
    DigestFirstPass,
    DigestPass,
    RowHash,
    StoreAdapter,
)
from driftgauge.stores.registry import LOOKUP3_ROW_HASH
from tests.conformance.items import ITEMS, RULES, SPEC
from tests.conformance.spec import Kind, Store
from tests.integration import dataset as ds

pytestmark = pytest.mark.integration


def python_tables(rows: Sequence[RowHash], width: int) -> dict[datetime, dict[int, iblt.Cell]]:
    """Return the tables encoding.iblt builds from `rows`, by their day's UTC start."""
    by_day: dict[datetime, list[tuple[int, int]]] = {}
    for r in rows:
        day = buckets.day_start(r.event_time, ds.TZ).astimezone(UTC)
        by_day.setdefault(day, []).append((r.row_hash, epoch_micros(r.event_time)))
    return {day: iblt.build(pairs, width) for day, pairs in by_day.items()}


class DigestAdapter(StoreAdapter, DigestFirstPass, Protocol):
    """An adapter with difference digests."""


async def window_scans(
    adapter: DigestAdapter, width: int
) -> tuple[DigestPass, list[BucketDigest], list[RowHash]]:
    """Return the data set window's day tables, its day buckets and its rows."""
    got = await adapter.day_and_cell_digests(ds.START, ds.END, width)
    days = await adapter.bucket_digests(ds.START, ds.END, "day")
    return got, days, [r async for r in adapter.iter_rows(ds.START, ds.END)]


def utc_tables(got: DigestPass) -> dict[datetime, dict[int, iblt.Cell]]:
    """Return an adapter's tables keyed by their day's UTC start."""
    return {d.astimezone(UTC): dict(t) for d, t in got.tables.items()}


@pytest.mark.parametrize("rules", [(), RULES], ids=["all_rows", "excluding"])
@pytest.mark.parametrize("width", [16, 101])
@pytest.mark.parametrize("row_hash", ["md5", "lookup3"])
async def test_day_tables_agree_with_python(
    kind: Kind, stored: Store, rules: tuple[object, ...], width: int, row_hash: RowHashName
) -> None:
    if row_hash == "lookup3":
        kind.require(LOOKUP3_ROW_HASH)
    source = await stored(kind, ITEMS)
    adapter = await source.open(replace(SPEC, exclusions=rules))  # type: ignore[arg-type]
    if row_hash != "md5":
        view = adapter.view  # type: ignore[attr-defined]
        await adapter.close()
        adapter = await open_adapter(replace(view, row_hash=row_hash))
    try:
        if not isinstance(adapter, DigestFirstPass):
            pytest.skip(f"{kind.name} has no difference digests")
        got, days, rows = await window_scans(adapter, width)
    finally:
        await adapter.close()
    assert got.days == days
    want = python_tables(rows, width)
    assert utc_tables(got) == want
    assert len(want) >= 5  # the DST day among them


@pytest.mark.parametrize("widths", [(16, 4096), (101, 546), (16, 16_384)])
async def test_one_day_scanned_again_wider_agrees_with_the_window_scan(
    kind: Kind, stored: Store, widths: tuple[int, int]
) -> None:
    # A day whose table did not peel is scanned again alone at a wider width; the engine
    # uses that table only when the day's aggregates are the window scan's (the DST day).
    source = await stored(kind, ITEMS)
    adapter = await source.open(SPEC)
    try:
        if not isinstance(adapter, DigestFirstPass):
            pytest.skip(f"{kind.name} has no difference digests")
        window = await adapter.day_and_cell_digests(ds.START, ds.END, widths[0])
        day = await adapter.day_and_cell_digests(*ds.DST_DAY, widths[1])
        rows = [r async for r in adapter.iter_rows(*ds.DST_DAY)]
    finally:
        await adapter.close()
    at = ds.DST_DAY[0].astimezone(UTC)
    assert day.days == [b for b in window.days if b.start.astimezone(UTC) == at]
    assert day.days and day.days[0].agg.count == len(rows) > 0
    pairs = [(r.row_hash, epoch_micros(r.event_time)) for r in rows]
    assert utc_tables(day) == {at: iblt.build(pairs, widths[1])}
