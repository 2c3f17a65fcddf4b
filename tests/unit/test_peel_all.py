"""Every differing day of a digest pass peeled first, their rows fetched in one query a side."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from driftgauge.encoding import sizing
from driftgauge.engine import peel_all
from driftgauge.stores.memory import DigestMemoryAdapter

from .engine_helpers import BASE, key_of, row
from .test_first_run import DAYS, PER_DAY, _counts, _drifted, _run

WIDTH = sizing.first_width(DAYS)
DRIFT = [("drift", PER_DAY, PER_DAY, PER_DAY, 0)] * DAYS


async def test_the_days_that_peel_share_one_fetch_a_side() -> None:
    src, rdr = _drifted()
    s_ad, r_ad = DigestMemoryAdapter(src), DigestMemoryAdapter(rdr)
    result = await _run(s_ad, r_ad, WIDTH)
    assert [_counts(b) for b in result.buckets] == DRIFT
    assert s_ad.calls == [f"days+cells:{WIDTH}", "rows"] and r_ad.calls == s_ad.calls
    assert all(b.tree == [] and b.drift_hours for b in result.buckets)
    assert result.rows_fetched == DAYS * 4 * PER_DAY


async def test_past_the_cap_each_day_fetches_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peel_all, "MAX_ROWS", 4 * PER_DAY)  # one day's differing rows
    src, rdr = _drifted()
    s_ad = DigestMemoryAdapter(src)
    result = await _run(s_ad, DigestMemoryAdapter(rdr), WIDTH)
    assert [_counts(b) for b in result.buckets] == DRIFT
    assert s_ad.calls == [f"days+cells:{WIDTH}"] + ["rows"] * DAYS


class _Vanishing(DigestMemoryAdapter):
    """A reader that loses one extra row of the first day after its first pass."""

    def __init__(self, rows: list[Any], gone: str) -> None:
        super().__init__(rows)
        self.gone = gone

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> Any:
        got = await super().day_and_cell_digests(start, end, width)
        self.rows = [r for r in self.rows if r.key != self.gone]
        return got


async def test_a_day_whose_rows_changed_after_the_pass_is_drilled_down_never_ok() -> None:
    src, rdr = _drifted()
    r_ad = _Vanishing(rdr, "x0-0")
    result = await _run(DigestMemoryAdapter(src), r_ad, WIDTH)
    assert result.error is None
    first, *rest = result.buckets
    # The fetched rows are not the ones the first day's digests named: that day is
    # fetched again alone, then drilled down, and its counts no longer add up to the
    # pass's aggregates (an error, never ok); the other days keep the shared fetch.
    assert first.status == "error" and first.tree
    assert first.reasons[0].startswith("unexplained_difference: day:")
    assert _counts(first)[1:] == (PER_DAY, PER_DAY - 1, PER_DAY, 0)  # the row is gone
    assert all(b.tree == [] and _counts(b) == DRIFT[0] for b in rest)
    assert r_ad.calls.count("rows") >= 2


async def test_a_day_holding_a_key_twice_is_left_to_the_drill_down() -> None:
    src, rdr = _drifted()
    copy = next(r for r in rdr if r.event_time >= BASE + timedelta(days=1))
    rdr.append(row(key_of(copy), copy.event_time + timedelta(seconds=1), "again"))
    s_ad = DigestMemoryAdapter(src)
    result = await _run(s_ad, DigestMemoryAdapter(rdr), WIDTH)
    assert result.error is None
    second = result.buckets[1]
    assert second.duplicates == 1 and second.tree
    assert all(b.tree == [] for i, b in enumerate(result.buckets) if i != 1)
