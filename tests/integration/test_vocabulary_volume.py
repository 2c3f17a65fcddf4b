"""Vocabulary and volume on the real stores: a PostgreSQL source and an OpenSearch reader."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from opensearchpy import AsyncOpenSearch

from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.signals.metrics import SignalsMetrics
from driftgauge.signals.run import evaluate_signals
from driftgauge.signals.store import SignalsStore
from tests.integration.runs import opened, reconcile_window
from tests.integration.signals_support import registry_of, state_pool
from tests.store_fixtures import load_index, pg_table, task_sides, tasks_and_search

pytestmark = pytest.mark.integration

DAY0 = datetime(2024, 4, 1, tzinfo=UTC)
DAYS = 36
EMPTY = 34
"""The source lost this day (and the reader never had it): both sides agree on nothing."""
TRIPLED = 33
"""Every source row of this day exists three times (a retried append)."""
NEW_TIER = 32
"""On this day the source starts writing a tier the reader's filter does not know."""
NOW = DAY0 + timedelta(days=DAYS, hours=3)


@dataclass(frozen=True)
class Task:
    task_id: str
    label: str | None
    conversation_key: str | None
    completed_at: datetime

    def doc(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "review_tier": self.label,
            "completed_at": self.completed_at.isoformat(),
        }


def tasks() -> list[Task]:
    """Return 40 to 60 tasks a day; every fifth has no join key (excluded on purpose)."""
    out = []
    for d in range(DAYS):
        if d == EMPTY:
            continue
        day = DAY0 + timedelta(days=d)
        for i in range(40 + (d * 7) % 21):
            label: str | None = "first_tier" if i % 3 else "second_tier"
            if d == NEW_TIER and i in (1, 2, 4):
                label = "third_tier"
            if d == NEW_TIER and i == 7:
                label = None
            key = None if i % 5 == 0 else f"conv-{d}-{i}"
            if d == NEW_TIER and key is None:
                label = "excluded_rows_never_count"
            out.append(Task(f"t{d:02d}-{i:03d}", label, key, day + timedelta(minutes=13 * i)))
    return out


def check_config(dsn: str, index: str) -> Check:
    raw = {
        **tasks_and_search(dsn),
        "checks": {
            "reviews": {
                **task_sides(
                    "vv_tasks",
                    index,
                    fields={"label": "review_tier"},
                    filter={"terms": {"review_tier": ["first_tier", "second_tier"]}},
                ),
                "fields": {"label": "string"},
                "exclusions": [{"reason": "no_join_key", "where": "conversation_key IS NULL"}],
                "settle": "2h",
                "schedule": {"recent": {"every": "1h", "days": 7}},
                "vocabulary": {"label": {}},
                "volume": {"trailing": 30, "sigmas": 3},
            }
        },
    }
    return load_text(yaml.safe_dump(raw)).checks["reviews"]


@dataclass
class Loaded:
    check: Check
    dsn: str


@pytest.fixture(scope="module")
async def loaded(
    pg_database: str, os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> AsyncIterator[Loaded]:
    rows = tasks()
    copies = [r for r in rows for _ in range(3 if r.task_id.startswith(f"t{TRIPLED}") else 1)]
    await pg_table(
        pg_database,
        "vv_tasks",
        "task_id text, label text, conversation_key text, completed_at timestamptz",
        [(r.task_id, r.label, r.conversation_key, r.completed_at) for r in copies],
    )
    index = os_index("dg_vv")
    await load_index(
        os_client,
        index,
        {"task_id": "keyword", "review_tier": "keyword", "completed_at": "date"},
        # The reader holds exactly what the sync job writes: rows with a join key.
        ({"_id": r.task_id, **r.doc()} for r in rows if r.conversation_key is not None),
        shards=1,
        replicas=0,
    )
    yield Loaded(check_config(pg_database, index), pg_database)


async def _judged(loaded: Loaded) -> tuple[Any, Callable[..., float | None], list[Any], list[Any]]:
    """Judge the signals of the last six days; return them, the metrics' getter, and what the
    state holds of volume and vocabulary."""
    start = DAY0 + timedelta(days=DAYS - 6)
    async with opened(loaded.check.source) as source, state_pool(loaded.dsn) as pool:
        store = SignalsStore(pool)
        found = await evaluate_signals(loaded.check, source, store, start, NOW, now=NOW)
        part = SignalsMetrics(store, ["reviews"])
        await part.refresh()
        volume, vocabulary = await store.volume("reviews"), await store.vocabulary("reviews")
    return found, registry_of(part).get_sample_value, volume, vocabulary


async def test_an_empty_source_day_reconciles_ok_but_breaks_the_volume_band(loaded: Loaded) -> None:
    check = loaded.check
    run = await reconcile_window(
        check, DAY0 + timedelta(days=EMPTY), DAY0 + timedelta(days=EMPTY + 1), now=NOW
    )
    found, v, stored, _ = await _judged(loaded)
    (bucket,) = run.buckets
    assert (bucket.status, bucket.expected, bucket.visible, bucket.drift) == ("ok", 0, 0, 0)
    by_day = {d.day.isoformat(): d for d in found.volume}
    empty = (DAY0 + timedelta(days=EMPTY)).date().isoformat()
    tripled = (DAY0 + timedelta(days=TRIPLED)).date().isoformat()
    # Six settled days are judged; today (settling) is not.
    assert len(by_day) == 6 and (NOW.date().isoformat() not in by_day)
    assert by_day[empty].anomaly and by_day[empty].distinct_keys == 0
    assert v("driftgauge_volume_anomaly", {"check": "reviews", "day": empty}) == 1
    # Three copies of every row leave the distinct-key count, and so the band, alone.
    assert not by_day[tripled].anomaly
    assert by_day[tripled].distinct_keys == (40 + (TRIPLED * 7) % 21) * 4 // 5
    assert v("driftgauge_volume_anomaly", {"check": "reviews", "day": tripled}) == 0
    assert sum(1 for d in by_day.values() if d.anomaly) == 1
    assert [d.day.isoformat() for d in stored] == sorted(by_day)


async def test_values_the_reader_filter_cannot_match_are_counted(loaded: Loaded) -> None:
    check = loaded.check
    found, v, _, (stored,) = await _judged(loaded)
    (result,) = found.vocabulary
    # third_tier on three rows and a NULL label; excluded rows' labels never count.
    assert result.unmatched == {"third_tier": 3, None: 1}
    labels = {"check": "reviews", "field": "label"}
    assert v("driftgauge_vocabulary_unmatched_values", labels) == 2
    assert v("driftgauge_vocabulary_unmatched_rows", labels) == 4
    assert stored["sample"] == [["third_tier", 3], [None, 1]]
    # Outside the days that carry the new tier nothing is unmatched.
    async with opened(check.source) as source, state_pool(loaded.dsn) as pool:
        clean = await evaluate_signals(
            check, source, SignalsStore(pool), DAY0, DAY0 + timedelta(days=NEW_TIER), now=NOW
        )
    assert clean.vocabulary[0].unmatched == {}
