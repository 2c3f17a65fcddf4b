"""A first pass split into range queries of whole days: the same verdicts, run at once."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.split import split_days
from driftgauge.engine.strategy import DAYS_ONLY, FirstPass
from driftgauge.stores.base import BucketDigest, Granularity, RowHash
from driftgauge.stores.memory import MemoryAdapter

from .engine_helpers import BASE, NOW, check_text, day_rows, key_of, make_check, row

BERLIN = ZoneInfo("Europe/Berlin")
DAYS = 10


def _parallel(parts: int, tz: str = "UTC") -> Any:
    """Return the check with both stores splitting their first pass into `parts`."""
    split = f", parallel_scans: {parts}"
    text = check_text(tz, src="postgres" + split, dst="opensearch" + split)
    return load_text(text).checks["reviews"]


def test_a_window_is_cut_at_midnights_into_parts_of_near_equal_days() -> None:
    utc = ZoneInfo("UTC")
    parts = split_days(BASE, BASE + timedelta(days=10), utc, 3, 60)
    assert parts == [
        (BASE, BASE + timedelta(days=3)),
        (BASE + timedelta(days=3), BASE + timedelta(days=6)),
        (BASE + timedelta(days=6), BASE + timedelta(days=10)),
    ]
    # More parts than days: one a day; one part or one day: not cut.
    assert len(split_days(BASE, BASE + timedelta(days=2), utc, 8, 60)) == 2
    assert split_days(BASE, BASE + timedelta(days=5), utc, 1, 60) == [
        (BASE, BASE + timedelta(days=5))
    ]
    assert split_days(BASE, BASE + timedelta(hours=20), utc, 4, 60) == [
        (BASE, BASE + timedelta(hours=20))
    ]


def test_a_cut_falls_on_local_midnight_across_a_dst_change() -> None:
    start = datetime(2026, 3, 25, tzinfo=BERLIN)  # spring forward on the 29th
    end = datetime(2026, 4, 4, tzinfo=BERLIN)
    parts = split_days(start, end, BERLIN, 4, 60)
    assert parts[0][0] == start and parts[-1][1] == end
    for (_, b), (c, _) in pairwise(parts):
        assert b == c
        local = b.astimezone(BERLIN)
        assert (local.hour, local.minute) == (0, 0), local
    sizes = [round((b - a).total_seconds() / 86400) for a, b in parts]
    assert sizes == [2, 3, 2, 3]  # 10 days in 4 parts; the 23-hour day counts as one


def test_a_window_off_the_slot_grid_is_not_cut() -> None:
    """Parts' slots align on each part's start: a cut off the window's grid would misplace them."""
    start = BASE + timedelta(seconds=30)
    assert split_days(start, start + timedelta(days=6), ZoneInfo("UTC"), 3, 60) == [
        (start, start + timedelta(days=6))
    ]


def _drifted(seed: int) -> tuple[list[RowHash], list[RowHash]]:
    """Return a source of DAYS days and a reader with some of its days drifted."""
    rng = random.Random(seed)
    source = [r for d in range(DAYS) for r in day_rows(d, 120)]
    reader = []
    for r in source:
        roll = rng.random()
        if roll < 0.03:
            continue  # missing
        reader.append(row(key_of(r), r.event_time, "changed") if roll < 0.05 else r)
        if roll > 0.99:
            reader.append(r)  # a duplicate
    reader += [
        row(f"x{i}", BASE + timedelta(days=rng.randrange(DAYS), minutes=i)) for i in range(7)
    ]
    return source, reader


def _verdicts(result: Any) -> list[tuple[Any, ...]]:
    return [
        (b.start, b.status, b.expected, b.visible, b.missing, b.extra, b.mismatched, b.duplicates)
        for b in result.buckets
    ]


@pytest.mark.parametrize(
    "first",
    [DAYS_ONLY, FirstPass(slots=True), FirstPass(width=16), FirstPass(rescan=True)],
    ids=["days", "slots", "digests", "rescan"],
)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_split_first_passes_give_the_same_verdicts(first: FirstPass, seed: int) -> None:
    source, reader = _drifted(seed)
    end = BASE + timedelta(days=DAYS)
    one = await reconcile(
        make_check(), MemoryAdapter(source), MemoryAdapter(reader), BASE, end, now=NOW, first=first
    )
    src, rdr = MemoryAdapter(source), MemoryAdapter(reader)
    three = await reconcile(_parallel(3), src, rdr, BASE, end, now=NOW, first=first)
    assert one.error is None and three.error is None
    assert _verdicts(three) == _verdicts(one)
    assert any(v[1] == "drift" for v in _verdicts(one))
    # The first pass was three range queries a side; the rest of the run is unchanged.
    first_calls = [c for c in src.calls if c.startswith(("buckets:day", "days+"))]
    assert len(first_calls) >= 3
    assert three.queries == one.queries + 4


@dataclass
class Gate(MemoryAdapter):
    """A memory adapter whose day scans wait until `want` of them are in flight at once."""

    want: int = 3
    most: int = 0
    in_flight: int = 0
    all_in: asyncio.Event = field(default_factory=asyncio.Event)

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        if granularity == "day":
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            if self.most >= self.want:
                self.all_in.set()
            try:
                async with asyncio.timeout(5):  # never all in at once: the test fails here
                    await self.all_in.wait()
            finally:
                self.in_flight -= 1
        return await super().bucket_digests(start, end, granularity)


async def test_the_parts_of_a_side_run_at_once() -> None:
    rows = [r for d in range(6) for r in day_rows(d, 30)]
    src, rdr = Gate(list(rows)), Gate(list(rows))
    result = await reconcile(
        _parallel(3, "Europe/Berlin"),
        src,
        rdr,
        datetime(2026, 3, 1, tzinfo=BERLIN),
        datetime(2026, 3, 7, tzinfo=BERLIN),
        now=NOW,
    )
    assert result.error is None
    assert (src.most, rdr.most) == (3, 3)
    assert src.calls.count("buckets:day") == 3


def test_parallel_scans_is_validated_and_refused_where_one_query_runs_at_a_time() -> None:
    with pytest.raises(ConfigError, match=r"stores\.src\.parallel_scans"):
        _parallel(0)
    with pytest.raises(ConfigError, match=r"stores\.src\.parallel_scans"):
        _parallel(33)
    duck = check_text(src="duckdb, parallel_scans: 2", dst="opensearch")
    with pytest.raises(ConfigError, match=r"stores\.src\.parallel_scans: a duckdb store runs one"):
        load_text(duck)
    assert make_check().source.store.parallel_scans == 1
