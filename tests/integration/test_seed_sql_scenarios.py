"""driftgauge on real stores reproduces the seed's full-outer-join SQL, bucket by bucket."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from driftgauge.configfile.loader import load_text
from driftgauge.engine.reconcile import reconcile
from driftgauge.stores import open_adapter
from tests.store_fixtures import (
    OS_URL,
    PG_OS_STORES,
    Scratch,
    load_index,
    pg_fetch,
    pg_table,
    scratch_stores,
)

pytestmark = pytest.mark.integration

BASE = datetime(2026, 2, 1, tzinfo=UTC)
DAYS = 3

# The seed's query, verbatim but for table names and the day expression.
SEED_SQL = """
WITH expected AS (
  SELECT task_id, label, (completed_at AT TIME ZONE 'UTC')::date AS day
  FROM source_tasks
  WHERE conversation_key IS NOT NULL
),
visible AS (
  SELECT task_id, min(label) AS label, max(label) AS label_max,
         min(day) AS day, count(*) AS copies
  FROM sink_export
  GROUP BY task_id
)
SELECT coalesce(e.day, v.day) AS day,
       count(e.task_id) AS expected,
       count(v.task_id) AS visible,
       count(*) FILTER (WHERE v.task_id IS NULL) AS missing,
       count(*) FILTER (WHERE e.task_id IS NULL) AS extra,
       count(*) FILTER (WHERE e.task_id IS NOT NULL AND v.task_id IS NOT NULL
                        AND (v.copies > 1 OR v.label <> v.label_max
                             OR v.label <> e.label)) AS mismatched
FROM expected e
FULL OUTER JOIN visible v ON v.task_id = e.task_id
GROUP BY 1
ORDER BY 1
"""

Row = dict[str, Any]


@dataclass
class Scenario:
    """A named way to damage the sink (or the source) after a healthy sync."""

    name: str
    damage: Callable[[list[Row], list[Row]], None]


def _vocabulary(src: list[Row], sink: list[Row]) -> None:
    for r in src[::9]:
        if r["conversation_key"] is not None:
            r["label"] = "third_tier"
    for d in sink:
        d["review_tier"] = next(r["label"] for r in src if r["task_id"] == d["task_id"])


def _three_copies(src: list[Row], sink: list[Row]) -> None:
    sink.extend(
        [dict(sink[4], _id=sink[4]["task_id"] + "-a"), dict(sink[4], _id=sink[4]["task_id"] + "-b")]
    )


def _source_ttl(src: list[Row], sink: list[Row]) -> None:
    del src[:40]


def _lost_update(src: list[Row], sink: list[Row]) -> None:
    for d in sink[::50]:
        d["review_tier"] = "second_tier" if d["review_tier"] == "first_tier" else "first_tier"


def _key_rename(src: list[Row], sink: list[Row]) -> None:
    for d in sink[::30]:
        d["task_id"] = "renamed-" + d["task_id"]
        d["_id"] = d["task_id"]


SCENARIOS = [
    Scenario("healthy", lambda s, k: None),
    Scenario("vocabulary_drift", _vocabulary),
    Scenario("three_copies", _three_copies),
    Scenario("source_ttl", _source_ttl),
    Scenario("lost_update", _lost_update),
    Scenario("join_key_rename", _key_rename),
]


def _rows(seed: int) -> list[Row]:
    rnd = random.Random(seed)
    out = []
    for d in range(DAYS):
        for i in range(150):
            out.append(
                {
                    "task_id": f"t{d}-{i:03d}",
                    "label": rnd.choice(["first_tier", "second_tier"]),
                    "conversation_key": None if rnd.random() < 0.39 else f"c{d}-{i}",
                    "completed_at": BASE + timedelta(days=d, seconds=rnd.randint(0, 86399)),
                }
            )
    return out


@pytest.fixture
async def stores() -> AsyncIterator[Scratch]:
    """Yield a fresh PG database and OS index; drop them after."""
    async with scratch_stores("dg_seed") as scratch:
        yield scratch


CONFIG = (
    PG_OS_STORES
    + """\
  reviews:
    source: {{store: pg, table: source_tasks, key: task_id, time: completed_at}}
    reader:
      store: os
      index: {index}
      filter: {{terms: {{review_tier: [first_tier, second_tier]}}}}
      key: task_id
      time: completed_at
      fields: {{label: review_tier}}
    fields: {{label: string}}
    exclusions: [{{reason: no_join_key, where: conversation_key IS NULL}}]
    settle: 0s
    drilldown: {{leaf_rows: 40}}
"""
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_matches_seed_sql(scenario: Scenario, stores: Scratch) -> None:
    dsn, index = stores.dsn, stores.index
    src = _rows(7)
    sink = [
        {
            "_id": r["task_id"],
            "task_id": r["task_id"],
            "review_tier": r["label"],
            "completed_at": r["completed_at"],
        }
        for r in src
        if r["conversation_key"]
    ]
    scenario.damage(src, sink)
    await pg_table(
        dsn,
        "source_tasks",
        "task_id text, label text, conversation_key text, completed_at timestamptz",
        [(r["task_id"], r["label"], r["conversation_key"], r["completed_at"]) for r in src],
    )
    await load_index(
        stores.client,
        index,
        {"task_id": "keyword", "review_tier": "keyword", "completed_at": "date"},
        ({**d, "completed_at": d["completed_at"].isoformat()} for d in sink),
    )
    # The reader's export: what its filtered query returns, loaded beside the source.
    hits = await stores.client.search(
        index=index,
        body={
            "size": 10000,
            "query": {"terms": {"review_tier": ["first_tier", "second_tier"]}},
        },
    )
    await pg_table(
        dsn,
        "sink_export",
        "task_id text, label text, day date",
        [
            (
                h["_source"]["task_id"],
                h["_source"]["review_tier"],
                datetime.fromisoformat(h["_source"]["completed_at"]).date(),
            )
            for h in hits["hits"]["hits"]
        ],
    )
    seed = {r["day"]: r for r in await pg_fetch(dsn, SEED_SQL)}

    check = load_text(CONFIG.format(dsn=dsn, os=OS_URL, index=index)).checks["reviews"]
    source, reader = await open_adapter(check.source), await open_adapter(check.reader)
    try:
        result = await reconcile(
            check, source, reader, BASE, BASE + timedelta(days=DAYS), now=BASE + timedelta(days=30)
        )
    finally:
        await source.close()
        await reader.close()
    assert result.error is None
    for b in result.buckets:
        want = seed[b.start.date()]
        got = (b.expected - b.excluded_total, b.visible, b.missing, b.extra, b.mismatched)
        assert got == (
            want["expected"],
            want["visible"],
            want["missing"],
            want["extra"],
            want["mismatched"],
        ), (scenario.name, b.start.date())
    drift = sum(b.drift for b in result.buckets)
    assert (drift == 0) == (scenario.name == "healthy")
