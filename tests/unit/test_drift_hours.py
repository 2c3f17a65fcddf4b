"""A day judged from its difference digests names the hours that differ, as drill-down would."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import key_of, make_check, row

# Europe/Berlin falls back on 2026-10-25: its 02:00 hour comes twice (00:00 and 01:00 UTC).
DAY = datetime(2026, 10, 24, 22, tzinfo=UTC)
NOW = DAY + timedelta(days=30)
TZ = ZoneInfo("Europe/Berlin")


def _rows(n: int) -> list[RowHash]:
    step = timedelta(hours=25) / n
    return [row(f"t{i}", DAY + i * step) for i in range(n)]


async def _runs(src: list[RowHash], rdr: list[RowHash]) -> tuple[RunResult, RunResult]:
    check = make_check(tz="Europe/Berlin", drilldown="{leaf_rows: 20}")
    end = DAY + timedelta(hours=25)
    plain = await reconcile(
        check, MemoryAdapter(src, timezone=TZ), MemoryAdapter(rdr, timezone=TZ), DAY, end, now=NOW
    )
    peeled = await reconcile(
        check,
        DigestMemoryAdapter(src, timezone=TZ),
        DigestMemoryAdapter(rdr, timezone=TZ),
        DAY,
        end,
        now=NOW,
        first=FirstPass(width=64),
    )
    return plain, peeled


def _differing_hours(result: RunResult) -> list[datetime]:
    (b,) = result.buckets
    return sorted(
        datetime.fromisoformat(n.label) for n in b.tree if n.level == "hour" and n.differs
    )


async def test_the_hours_of_the_differing_rows_are_the_hours_drill_down_finds() -> None:
    rng = random.Random(7)
    for _ in range(10):
        src = _rows(rng.choice([50, 300, 900]))
        rdr = list(src)
        for i in rng.sample(range(len(src)), rng.randrange(1, 12)):
            if rng.random() < 0.5:
                rdr[i] = row(key_of(src[i]), src[i].event_time, "changed")
            else:
                rdr[i] = row(f"gone{i}", src[i].event_time)  # one missing, one extra
        rdr = [r for r in rdr if not key_of(r).startswith("gone") or rng.random() < 0.5]
        plain, peeled = await _runs(src, rdr)
        (b,) = peeled.buckets
        assert b.status == "drift" and b.tree == [], "the day was drilled, not peeled"
        assert b.drift_hours == _differing_hours(plain)
        assert (b.missing, b.extra, b.mismatched) == (
            plain.buckets[0].missing,
            plain.buckets[0].extra,
            plain.buckets[0].mismatched,
        )


async def test_each_of_the_two_hours_of_a_day_that_falls_back_is_named_on_its_own() -> None:
    src = _rows(250)
    rdr = list(src)
    first = next(i for i, r in enumerate(src) if r.event_time >= DAY + timedelta(hours=2))
    rdr[first] = row(key_of(src[first]), src[first].event_time, "changed")
    plain, peeled = await _runs(src, rdr)
    assert peeled.buckets[0].drift_hours == [datetime(2026, 10, 25, 0, tzinfo=UTC)]
    assert peeled.buckets[0].drift_hours == _differing_hours(plain)
