"""Composite keys on every kind: the tuple golden vectors, NULL parts, and planted drift."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from driftgauge.configfile.loader import load_text
from driftgauge.core.fields import NULL_KEY, KeyType
from driftgauge.encoding import digest as d
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.strategy import DAYS_ONLY, FirstPass
from driftgauge.stores.base import RowHash, StoreAdapter
from tests.conformance.kinds import KINDS
from tests.conformance.spec import COMPOSITE_KEYS, READER_ONLY, Kind, Spec, Store, Table

pytestmark = pytest.mark.integration

GOLDEN = json.loads(
    (Path(__file__).parents[1] / "golden" / "tuple_vectors.json").read_text(encoding="utf-8")
)
BASE = datetime(2026, 6, 1, tzinfo=UTC)
WINDOW = (BASE, BASE + timedelta(days=1))
PAIRS = [v for v in GOLDEN["vectors"] if v["key_types"] == ["string", "string"] and not v["fields"]]
"""The vectors of two string parts and no field, one table holds them all."""
TWO_STRINGS = Table(
    name="tuple2",
    columns=(("a", "key"), ("b", "key"), ("ts", "instant")),
    rows=[(*v["key"], BASE + timedelta(minutes=i)) for i, v in enumerate(PAIRS)],
    shards=2,
)
TYPES: tuple[KeyType, ...] = ("string", "integer", "integer")
RUNS_ROWS: list[tuple[Any, ...]] = [
    ("c-1", 7, 12, "done"),  # the golden vector "conversation, run and task"
    ("c-1", 7, 1, "done"),
    ("c-1", 71, 2, "done"),  # ("c-1", 7, 12) and ("c-1", 71, 2) share a separator-free text
    ("c-1", -3, 0, None),
    ("C-1", 7, 1, "done"),  # case and a trailing space make other keys (no collation folds)
    ("c-1 ", 7, 1, "done"),
    ("c-2", 1, 1, "dup"),
    ("c-2", 1, 1, "dup"),  # one key twice
    ("c-3", None, 1, "no run"),  # NULL parts: excluded, never a key
    (None, 1, 1, "no conversation"),
    ("c-4", 1, None, "no task"),
]
RUNS = Table(
    name="tuple3",
    columns=(
        ("conversation_id", "key"),
        ("run_id", "integer"),
        ("task_id", "integer"),
        ("label", "text"),
        ("ts", "instant"),
    ),
    rows=[(*r, BASE + timedelta(minutes=10 * i)) for i, r in enumerate(RUNS_ROWS)],
    shards=2,
)
KEY = ("conversation_id", "run_id", "task_id")
RUNS_SPEC = Spec(key=KEY, key_type=TYPES, time="ts", fields={"label": ("label", "string")})


def _expected(rows: list[tuple[Any, ...]], source: bool) -> list[tuple[str, int, str]]:
    """Return (key hash, row hash, key text) of each row a source (or a reader) holds."""
    out = []
    for *parts, label in rows:
        key = tuple(parts)
        if not (source and d.has_null_part(key)):
            khash, rhash = d.hash_row(key, TYPES, [label], ["string"])
            out.append((khash, rhash, d.key_text(key)))
    return sorted(out)


async def _rows(adapter: StoreAdapter, prefixes: list[str] | None = None) -> list[RowHash]:
    return [r async for r in adapter.iter_rows(*WINDOW, prefixes)]


async def test_tuple_golden_vectors(kind: Kind, stored: Store) -> None:
    kind.require(COMPOSITE_KEYS)
    source = await stored(kind, TWO_STRINGS)
    adapter = await source.open(Spec(key=("a", "b"), time="ts", fields={}))
    try:
        rows = await _rows(adapter)
    finally:
        await adapter.close()
    got = sorted((r.key_hash, r.row_hash, r.key) for r in rows)
    want = sorted((v["key_hash"], int(v["row_hash"]), v["key_text"]) for v in PAIRS)
    assert got == want


async def test_composite_keys_aggregate_as_python_and_null_parts_are_excluded(
    kind: Kind, stored: Store
) -> None:
    kind.require(COMPOSITE_KEYS)
    source = await stored(kind, RUNS)
    adapter = await source.open(RUNS_SPEC)
    try:
        rows = await _rows(adapter)
        (day,) = await adapter.bucket_digests(*WINDOW, "day")
        hours = await adapter.bucket_digests(*WINDOW, "hour")
        slots = await adapter.slot_digests(*WINDOW, 3600)
        prefixes = await adapter.prefix_digests(*WINDOW, 1)
        first = sorted({r.key_hash[0] for r in rows})[0]
        under = await _rows(adapter, [first])
    finally:
        await adapter.close()
    source_like = not kind.has(READER_ONLY)
    expected = _expected(RUNS_ROWS, source_like)
    assert sorted((r.key_hash, r.row_hash, r.key) for r in rows) == expected
    golden = next(v for v in GOLDEN["vectors"] if v["name"] == "conversation, run and task")
    assert (golden["key_hash"], int(golden["row_hash"]), golden["key_text"]) in expected
    want = d.aggregate((h, r) for h, r, _ in expected)
    nulls = 3 if source_like else 0
    assert want.distinct_keys == want.count - 1 == 10 - nulls
    assert day.agg == want
    assert day.excluded == ({NULL_KEY: nulls} if nulls else {})
    assert sum(h.agg.count for h in hours) == want.count
    assert sum(h.excluded.get(NULL_KEY, 0) for h in hours) == nulls
    if not source_like:  # a reader's NULL part is encoded and shown as null
        assert '["c-3",null,1]' in {r.key for r in rows}
    assert sum(s.agg.count for s in slots) == want.count
    assert sum(a.count for a in prefixes.values()) == want.count
    assert sum(a.distinct_keys for a in prefixes.values()) == want.distinct_keys
    assert sorted(r.key_hash for r in under) == [h for h, _, _ in expected if h[0] == first]


PLANTED_SOURCE = Table(
    name="tuple_src",
    columns=RUNS.columns,
    rows=[
        *[
            (f"c{c}", r, t, "ok", BASE + timedelta(minutes=c * 60 + r * 7 + t))
            for c in range(3)
            for r in range(4)
            for t in range(3)
        ],
        ("c1", 1, 23, "ok", BASE + timedelta(hours=5)),  # missing
        ("c9", 9, 9, "ok", BASE + timedelta(hours=6)),  # missing
        ("c7", 7, 7, "ok", BASE + timedelta(hours=7)),  # duplicated in the reader
        ("c8", None, 8, "no run", BASE + timedelta(hours=8)),  # excluded: null_key
    ],
    shards=2,
)
PLANTED_READER = Table(
    name="tuple_rdr",
    columns=RUNS.columns,
    rows=[
        *[
            (
                f"c{c}",
                r,
                t,
                "changed" if (c, r, t) == (2, 2, 2) else "ok",
                BASE + timedelta(minutes=c * 60 + r * 7 + t),
            )
            for c in range(3)
            for r in range(4)
            for t in range(3)
        ],
        ("c11", 2, 3, "ok", BASE + timedelta(hours=5)),  # extra: c1|1|23 cut elsewhere
        ("c7", 7, 7, "ok", BASE + timedelta(hours=7)),
        ("c7", 7, 7, "ok", BASE + timedelta(hours=7)),
    ],
    shards=2,
)
CHECK = """
stores:
  src: {kind: postgres, dsn: "postgresql://x@127.0.0.1/x"}
  dst: {kind: postgres, dsn: "postgresql://x@127.0.0.1/y"}
state: {dsn: "postgresql://x@127.0.0.1/x"}
checks:
  runs:
    source: {store: src, table: t, key: [conversation_id, run_id, task_id], time: ts}
    reader: {store: dst, table: t, key: [conversation_id, run_id, task_id], time: ts}
    key_type: [string, integer, integer]
    fields: {label: string}
    drilldown: {leaf_rows: 8}
"""
POSTGRES = next(k for k in KINDS if k.name == "postgres")


@pytest.mark.parametrize(
    "first_pass",
    [DAYS_ONLY, FirstPass(slots=True), FirstPass(width=16)],
    ids=["drill-down", "slots-first", "difference-digests"],
)
async def test_planted_drift_under_a_composite_key_from_postgres(
    kind: Kind, stored: Store, first_pass: FirstPass
) -> None:
    """PostgreSQL as the source, this kind as the reader: every planted key found exactly.

    Whichever first pass the engine takes (a kind without one falls back to drilling down).
    """
    kind.require(COMPOSITE_KEYS)
    check = load_text(CHECK).checks["runs"]
    source = await (await stored(POSTGRES, PLANTED_SOURCE)).open(RUNS_SPEC)
    reader = await (await stored(kind, PLANTED_READER)).open(RUNS_SPEC)
    try:
        result = await reconcile(
            check, source, reader, *WINDOW, now=BASE + timedelta(days=9), first=first_pass
        )
    finally:
        await source.close()
        await reader.close()
    (day,) = result.buckets
    assert day.status == "drift", day.reasons
    assert (day.missing, day.extra, day.mismatched, day.duplicates) == (2, 1, 2, 1)
    assert day.excluded == {NULL_KEY: 1}
    assert {(k.kind, k.key) for k in day.samples} == {
        ("missing", '["c1",1,23]'),
        ("missing", '["c9",9,9]'),
        ("extra", '["c11",2,3]'),
        ("mismatched", '["c2",2,2]'),
        ("mismatched", '["c7",7,7]'),
    }
    assert [d.shown_key(k.key, True) for k in day.samples if k.kind == "extra"] == [["c11", 2, 3]]


CASES = Table(
    name="casekeys",
    columns=(("k", "key"), ("n", "integer"), ("ts", "instant")),
    rows=[
        (k, 1, BASE + timedelta(minutes=i)) for i, k in enumerate(["c-1", "C-1", "c-1 ", "é", "e"])
    ],
    shards=1,
)


@pytest.mark.parametrize("key", ["k", ("k", "n")], ids=["one-column", "composite"])
async def test_a_prefix_export_never_mixes_keys_a_collation_folds(
    kind: Kind, stored: Store, key: str | tuple[str, ...]
) -> None:
    """Each key's rows come under its own hash prefix, not under a folded twin's."""
    if isinstance(key, tuple):
        kind.require(COMPOSITE_KEYS)
    types = ("string", "integer") if isinstance(key, tuple) else "string"
    adapter = await (await stored(kind, CASES)).open(
        Spec(key=key, key_type=types, time="ts", fields={})
    )
    try:
        rows = await _rows(adapter)
        by_prefix = {r.key_hash[:2]: r.key for r in rows}
        assert len(by_prefix) == len(rows) == 5
        for prefix, shown in by_prefix.items():
            assert [r.key for r in await _rows(adapter, [prefix])] == [shown]
    finally:
        await adapter.close()
