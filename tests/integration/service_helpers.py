"""Builders for service tests: a config on in-memory stores, rows hashed like a store would."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from driftgauge.config.frozen import Config, View
from driftgauge.configfile.loader import load_text
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.fields import FieldType
from driftgauge.encoding import digest
from driftgauge.engine.result import BucketResult, KeyDiff, Node, RunResult
from driftgauge.stores.base import RowHash, StoreAdapter
from driftgauge.stores.memory import MemoryAdapter

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
DAY0 = datetime(2026, 3, 8, tzinfo=UTC)
TOKEN = "s3cret-token-for-tests"

STORES = """
stores:
  src: {kind: postgres, dsn: "postgresql://unused@127.0.0.1:1/unused"}
  dst: {kind: opensearch, url: "http://127.0.0.1:1"}
"""
"""The stores the templates name: never dialled, tests open in-memory adapters in their place."""
REVIEWS_SOURCE = """  reviews:
    source: {store: src, table: reviews, key: task_id, time: completed_at}
"""
"""The `reviews` check's first lines: its source is the (src, reviews) adapter."""
REVIEWS_SIDES = (
    REVIEWS_SOURCE
    + """    reader:
      store: dst
      index: reviews
      key: task_id
      time: completed_at
"""
)
"""The `reviews` check's source and its reader, the (dst, reviews) adapter; options may follow."""
# Flow style, as tests that edit the text expect: "time: completed_at}" ends the reader.
REVIEWS = (
    REVIEWS_SOURCE
    + """    reader: {store: dst, index: reviews, key: task_id, time: completed_at}
    fields: {label: string}
"""
)
"""The `reviews` check over the (src, reviews) and (dst, reviews) adapters, without options."""
ORDERS = """  orders:
    source: {store: src, table: orders, key: id, time: created_at}
    reader: {store: dst, index: orders, key: id, time: created_at}
    key_type: integer
    fields: {total: decimal}
    schedule: {recent: {every: 1h, days: 3}}
"""
"""The `orders` check over the (src, orders) and (dst, orders) adapters: integer keys."""

CONFIG = (
    STORES
    + """state: {dsn: "<DSN>", schema: <SCHEMA>}
api: {tokens: ["<TOKEN>"], public_read: <PUBLIC>, sample_keys: 50}
checks:
"""
    + REVIEWS
    + """    settle: 2h
    drilldown: {leaf_rows: 20, max_depth: 4}
    schedule: {recent: {every: 1h, days: 3}, full: {every: 1d, days: 30}}
"""
    + ORDERS
)


def filled(template: str, dsn: str, schema: str, **values: str) -> str:
    """Return `template` with <DSN>, <SCHEMA>, <TOKEN> and each <NAME> of `values` filled in."""
    text = template.replace("<DSN>", dsn).replace("<SCHEMA>", schema).replace("<TOKEN>", TOKEN)
    for name, value in values.items():
        text = text.replace(f"<{name.upper()}>", value)
    return text


class Clock:
    """A clock the test moves by hand: set `now`, and everything reading it follows."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def schema_name() -> str:
    """Return a fresh schema name for one test."""
    return f"dg_{uuid.uuid4().hex[:10]}"


def make_config(dsn: str, schema: str, *, public_read: bool = True) -> Config:
    """Return the two-check config with its state in `schema` of `dsn`."""
    return load_text(filled(CONFIG, dsn, schema, public=str(public_read).lower()))


def hashed(key: str, label: str, when: datetime, key_type: str = "string") -> RowHash:
    """Return a row hashed with the real canonical encoding, as a store would."""
    typed: str | int = int(key) if key_type == "integer" else key
    field_type: FieldType = "decimal" if key_type == "integer" else "string"
    khash, rhash = digest.hash_row(typed, key_type, [label], [field_type])  # type: ignore[arg-type]
    return RowHash(key, khash, rhash, when)


def key_of(r: RowHash) -> str:
    """Return the key of a row built here; these builders never make a NULL key."""
    assert r.key is not None
    return r.key


def day_rows(day: datetime, n: int, tag: str = "t") -> list[RowHash]:
    """Return n rows spread over the hours of one day."""
    return [
        hashed(f"{tag}{day:%m%d}-{i:04d}", "ok", day + timedelta(seconds=i * 86400 // n))
        for i in range(n)
    ]


def planted(rows: list[RowHash]) -> tuple[list[RowHash], dict[str, set[str]]]:
    """Return a reader copy of `rows` with 2 missing, 1 mismatched and 1 extra row per day."""
    by_day: dict[str, list[RowHash]] = {}
    for r in rows:
        by_day.setdefault(r.event_time.date().isoformat(), []).append(r)
    reader: list[RowHash] = []
    truth: dict[str, set[str]] = {"missing": set(), "extra": set(), "mismatched": set()}
    for day, day_rows_ in sorted(by_day.items()):
        gone = {key_of(day_rows_[3]), key_of(day_rows_[40])}
        changed = key_of(day_rows_[7])
        truth["missing"] |= gone
        truth["mismatched"].add(changed)
        for r in day_rows_:
            if r.key in gone:
                continue
            reader.append(hashed(changed, "changed", r.event_time) if r.key == changed else r)
        extra = hashed(f"x{day}", "ok", day_rows_[10].event_time)
        truth["extra"].add(key_of(extra))
        reader.append(extra)
    return reader, truth


def memory_opener(
    sides: dict[tuple[str, str], MemoryAdapter],
) -> Callable[[View], Awaitable[StoreAdapter]]:
    """Return an opener that hands out in-memory adapters by (store, table or index)."""

    async def opener(view: View) -> StoreAdapter:
        return sides[(view.store.name, view.table or view.index or "")]

    return opener


def sample_result(check: str = "reviews") -> RunResult:
    """Return a hand-built run: a drifting day with a tree and samples, and a settling day."""
    big = (1 << 64) - 5
    hour = DAY0.replace(hour=3)
    tree = [
        Node("hour", DAY0.replace(hour=2).isoformat(), Aggregate(10, 10, 7), Aggregate(10, 10, 7)),
        Node(
            "hour",
            hour.isoformat(),
            Aggregate(12, 12, big),
            Aggregate(11, 11, 99),
            children=[
                Node(
                    "prefix",
                    "a",
                    Aggregate(3, 3, 1),
                    Aggregate(2, 2, 2),
                    children=[
                        Node("prefix", "a7", Aggregate(1, 1, 1), Aggregate(0, 0, 0), fetched=True)
                    ],
                ),
                Node("prefix", "c", Aggregate(1, 1, 5), Aggregate(1, 1, 6), fetched=True),
            ],
        ),
        Node("prefix", "f", Aggregate(4, 4, 4), Aggregate(5, 5, 5), fetched=True),
    ]
    samples = [KeyDiff(f"m{i:03d}", "missing", 1, 0, hour + timedelta(minutes=i)) for i in range(7)]
    samples += [KeyDiff("dup", "mismatched", 1, 2, hour), KeyDiff("x1", "extra", 0, 1, None)]
    drifting = BucketResult(
        start=DAY0,
        status="drift",
        expected=110,
        visible=101,
        excluded={"no_join_key": 3},
        missing=7,
        extra=1,
        mismatched=1,
        duplicates=1,
        source=Aggregate(107, 107, big),
        reader=Aggregate(102, 101, 12345),
        reasons=["missing 7 of 107"],
        tree=tree,
        samples=samples,
        ledger_excluded={"skipped": 1},
    )
    settling = BucketResult(
        start=DAY0 + timedelta(days=1),
        status="settling",
        expected=5,
        visible=5,
        source=Aggregate(5, 5, 9),
        reader=Aggregate(5, 5, 9),
    )
    return RunResult(
        check,
        DAY0,
        DAY0 + timedelta(days=2),
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=3),
        buckets=[drifting, settling],
        queries=12,
        rows_fetched=40,
    )
