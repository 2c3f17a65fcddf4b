"""Every kind's day, hour and prefix aggregates and exported rows agree with Python."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from driftgauge.config.frozen import View
from driftgauge.core.errors import StoreQueryError, StoreTimeout, StoreUnavailable
from driftgauge.stores import open_adapter, registry
from driftgauge.stores.base import StoreAdapter, VocabularyCounter
from tests.conformance.items import ITEMS, NOT_TIER_C, ROWS, RULES, SPEC
from tests.conformance.spec import (
    FIELD_ERRORS,
    ROW_CHANGES,
    STORE_ERRORS,
    TIMEOUTS,
    VOCABULARY_COUNTER,
    Kind,
    Rule,
    Source,
    Store,
)
from tests.integration import dataset as ds

pytestmark = pytest.mark.integration

WINDOW = (ds.START, ds.END)
HUNG_TIMEOUT = 2.0
"""The store timeout of an adapter whose store stops answering."""


@dataclass
class Loaded:
    """The data set as one kind holds it, with an adapter on it."""

    source: Source
    adapter: StoreAdapter


@pytest.fixture(scope="module")
async def loaded(kind: Kind, stored: Store) -> AsyncIterator[Loaded]:
    """Yield the items as the kind holds them and an adapter on them."""
    source = await stored(kind, ITEMS)
    adapter = await source.open(SPEC)
    try:
        yield Loaded(source, adapter)
    finally:
        await adapter.close()


async def _rows(adapter: StoreAdapter, prefixes: list[str] | None = None) -> list[Any]:
    return sorted(
        [
            (r.key, r.key_hash, r.row_hash, r.event_time)
            async for r in adapter.iter_rows(*WINDOW, prefixes)
        ]
    )


@pytest.mark.parametrize("granularity", ["day", "hour"])
async def test_buckets_agree_with_python(loaded: Loaded, granularity: str) -> None:
    want = ds.python_buckets(ROWS, granularity)
    assert await loaded.adapter.bucket_digests(*WINDOW, granularity) == want  # type: ignore[arg-type]
    assert sum(b.agg.count for b in want) == ds.ROWS
    if granularity == "day":
        assert len(want) == 6
    else:  # the spring-forward day has 23 local hours
        assert sum(b.start.day == 10 for b in want) == 23


@pytest.mark.parametrize(("depth", "within"), [(1, None), (2, None), (3, ["0", "a7", "ff"])])
async def test_prefix_digests_agree_with_python(
    loaded: Loaded, depth: int, within: list[str] | None
) -> None:
    want = ds.python_prefixes(ROWS, depth, within)
    assert await loaded.adapter.prefix_digests(*WINDOW, depth, within) == want
    assert len(want) == (16**depth if within is None else len(want))
    assert await loaded.adapter.prefix_digests(*WINDOW, depth, []) == {}


@pytest.mark.parametrize("prefixes", [None, ["f", "01"]])
async def test_iter_rows_yield_identical_rows(loaded: Loaded, prefixes: list[str] | None) -> None:
    want = ds.python_rows(ROWS, prefixes)
    assert await _rows(loaded.adapter, prefixes) == want
    assert len(want) == ds.ROWS if prefixes is None else 0 < len(want) < ds.ROWS


@pytest.mark.parametrize("change", ["label", "delete", "duplicate"])
async def test_one_row_change_moves_exactly_one_bucket(
    kind: Kind, loaded: Loaded, change: str
) -> None:
    kind.require(ROW_CHANGES)
    victim = ROWS[123]
    before = ds.python_buckets(ROWS, "day")
    if change == "label":
        changed = victim.with_label("changed")
        after_rows = [changed if r is victim else r for r in ROWS]
        stored_rows = [changed.record()]
    elif change == "delete":
        after_rows = [r for r in ROWS if r is not victim]
        stored_rows = []
    else:
        after_rows = [*ROWS, victim]
        stored_rows = [victim.record(), victim.record()]
    await loaded.source.replace_rows(victim.id, stored_rows)
    try:
        want = ds.python_buckets(after_rows, "day")
        assert await loaded.adapter.bucket_digests(*WINDOW, "day") == want
    finally:
        await loaded.source.replace_rows(victim.id, [victim.record()])
    moved = [(b.agg, a.agg) for b, a in zip(before, want, strict=True) if b != a]
    assert len(moved) == 1
    old, new = moved[0]
    _, h = victim.hashes()
    if change == "label":
        assert (new.count, new.distinct_keys) == (old.count, old.distinct_keys)
        assert new.digest != old.digest
    elif change == "delete":
        assert (new.count, new.distinct_keys) == (old.count - 1, old.distinct_keys - 1)
        assert new.digest == (old.digest - h) % 2**64
    else:  # a sum sees the second copy; XOR would cancel it
        assert (new.count, new.distinct_keys) == (old.count + 1, old.distinct_keys)
        assert new.digest == (old.digest + h) % 2**64
    assert await loaded.adapter.bucket_digests(*WINDOW, "day") == before  # restored


async def test_reader_filter_yields_the_filtered_view(loaded: Loaded) -> None:
    visible = [r for r in ROWS if r.tier != "c"]
    want = ds.python_buckets(visible, "day")
    adapter = await loaded.source.open(replace(SPEC, keep=NOT_TIER_C))
    try:
        assert await adapter.bucket_digests(*WINDOW, "day") == want
        assert await adapter.prefix_digests(*WINDOW, 1) == ds.python_prefixes(visible, 1)
        assert len([r async for r in adapter.iter_rows(*WINDOW, ["e"])]) == len(
            ds.python_rows(visible, ["e"])
        )
    finally:
        await adapter.close()
    assert want != ds.python_buckets(ROWS, "day")
    assert sum(b.agg.count for b in want) == len(visible) < ds.ROWS


async def test_exclusions_are_counted_by_reason_and_kept_out(loaded: Loaded) -> None:
    want = ds.python_buckets(ROWS, "day", ds.pg_reason)
    expected_rows = [r for r in ROWS if ds.pg_reason(r) is None]
    adapter = await loaded.source.open(replace(SPEC, exclusions=RULES))
    try:
        assert await adapter.bucket_digests(*WINDOW, "day") == want
        assert await adapter.prefix_digests(*WINDOW, 1) == ds.python_prefixes(expected_rows, 1)
        assert await _rows(adapter) == ds.python_rows(expected_rows)
    finally:
        await adapter.close()
    last = want[-1]
    assert last.agg.count == 0 and sum(last.excluded.values()) == ds.ONLY_EXCLUDED
    assert set(want[0].excluded) == {"no_label", "tier_c"}
    # The conservation law: expected + excluded = every source row in the window.
    assert sum(b.agg.count + sum(b.excluded.values()) for b in want) == ds.ROWS


async def test_an_unreachable_store_is_unavailable(kind: Kind) -> None:
    kind.require(STORE_ERRORS)
    assert kind.fixtures.failures is not None
    with pytest.raises(StoreUnavailable, match=kind.fixtures.failures.unreachable_match):
        adapter = await kind.fixtures.open_unreachable(replace(SPEC, fields={}))
        try:
            await adapter.prefix_digests(*WINDOW, 1)
        finally:
            await adapter.close()


async def test_a_missing_relation_is_a_query_error(kind: Kind, loaded: Loaded) -> None:
    kind.require(STORE_ERRORS)
    failures = kind.fixtures.failures
    assert failures is not None
    adapter = await loaded.source.open(replace(SPEC, relation=failures.missing_relation))
    try:
        with pytest.raises(StoreQueryError, match=failures.missing_match[0]):
            await adapter.bucket_digests(*WINDOW, "day")
        with pytest.raises(StoreQueryError, match=failures.missing_match[1]):
            _ = [r async for r in adapter.iter_rows(*WINDOW)]
    finally:
        await adapter.close()


async def test_an_unusable_field_is_a_query_error(kind: Kind, loaded: Loaded) -> None:
    kind.require(FIELD_ERRORS)
    assert kind.fixtures.failures is not None
    field = kind.fixtures.failures.unusable_field
    adapter = await loaded.source.open(replace(SPEC, fields={"label": (field, "string")}))
    try:
        with pytest.raises(StoreQueryError, match=field):
            await adapter.prefix_digests(*WINDOW, 1)
    finally:
        await adapter.close()


async def test_a_store_that_stops_answering_is_a_timeout(kind: Kind, loaded: Loaded) -> None:
    kind.require(TIMEOUTS)
    assert kind.fixtures.failures is not None
    hung = await loaded.source.open_hung(SPEC, store_timeout=HUNG_TIMEOUT)
    try:
        assert await hung.adapter.prefix_digests(*WINDOW, 1) == ds.python_prefixes(ROWS, 1)
        hung.hang()
        began = time.monotonic()
        with pytest.raises(StoreTimeout, match=kind.fixtures.failures.timeout_match):
            await hung.adapter.bucket_digests(*WINDOW, "day")
        assert time.monotonic() - began < HUNG_TIMEOUT + 2
    finally:
        await hung.close()


@pytest.mark.parametrize("rules", [(), RULES], ids=["all_rows", "excluding"])
@pytest.mark.parametrize("column", ["tier", "label"])
async def test_value_counts_agree_with_python(
    kind: Kind, loaded: Loaded, column: str, rules: tuple[Rule, ...]
) -> None:
    kind.require(VOCABULARY_COUNTER)
    kept = [r for r in ROWS if not rules or ds.pg_reason(r) is None]
    want = Counter(getattr(r, column) for r in kept)
    adapter = await loaded.source.open(replace(SPEC, exclusions=rules))
    try:
        assert isinstance(adapter, VocabularyCounter)
        assert await adapter.value_counts(column, *WINDOW) == dict(want)
    finally:
        await adapter.close()
    assert (None in want) == (column == "label" and not rules)  # a NULL is its own value


@pytest.mark.parametrize("granularity", ["day", "hour"])
async def test_measure_totals_agree_with_decimal_sums(loaded: Loaded, granularity: str) -> None:
    view = getattr(loaded.adapter, "view", None)
    if not isinstance(view, View) or not registry.kind_of(view.kind).has(registry.MEASURE_TOTALS):
        pytest.skip("the kind does not sum measures")
    # Not qty: it holds ±2^62 edge values, past what 64-bit scaled integers total.
    adapter = await open_adapter(replace(view, measures=("amount",), measure_scale=2))
    try:
        got = await adapter.bucket_digests(*WINDOW, granularity)  # type: ignore[arg-type]
    finally:
        await adapter.close()
    want: dict[datetime, dict[str, Decimal]] = {}
    for r in ROWS:
        t = want.setdefault(
            ds.bucket_start(r.ts, granularity).astimezone(UTC), {"amount": Decimal(0)}
        )
        t["amount"] += r.amount or 0
    assert {b.start.astimezone(UTC): dict(b.agg.measures or {}) for b in got} == want
