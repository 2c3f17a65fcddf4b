"""A drifted run with no stored verdict: its digests are sized without history, and peel."""

from __future__ import annotations

from datetime import datetime, timedelta

from driftgauge.encoding import iblt, sizing
from driftgauge.engine.plan import StoredDrift
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.jobs.first_pass import first_pass_plan
from driftgauge.stores.base import DigestPass, RowHash
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import BASE, NOW, History, between, day_rows, key_of, make_check, row

DAYS = 3
PER_DAY = 60
"""Missing, extra and changed rows a day: 240 differing rows, far over 32 cells a sub-table."""


def _drifted() -> tuple[list[RowHash], list[RowHash]]:
    src: list[RowHash] = []
    rdr: list[RowHash] = []
    for d in range(DAYS):
        rows = day_rows(d, 1500, prefix=f"d{d}-")
        src += rows
        for i, r in enumerate(rows):
            if i % 25 == 0 and i // 25 < PER_DAY:
                continue  # missing
            if i % 25 == 1 and i // 25 < PER_DAY:
                rdr.append(row(key_of(r), r.event_time, "changed"))
            else:
                rdr.append(r)
        day = BASE + timedelta(days=d)
        rdr += [row(f"x{d}-{j}", day + timedelta(seconds=7 * j + 3.5)) for j in range(PER_DAY)]
    return src, rdr


async def _run(source: MemoryAdapter, reader: MemoryAdapter, width: int) -> RunResult:
    check = make_check(drilldown="{leaf_rows: 20}")
    end = BASE + timedelta(days=DAYS)
    return await reconcile(check, source, reader, BASE, end, now=NOW, first=FirstPass(width=width))


def _counts(b: BucketResult) -> tuple[object, ...]:
    return (b.status, b.missing, b.extra, b.mismatched, b.duplicates)


async def test_a_day_too_big_for_its_digests_is_scanned_again_wider_not_drilled() -> None:
    src, rdr = _drifted()
    s_ad, r_ad = DigestMemoryAdapter(src), DigestMemoryAdapter(rdr)
    result = await _run(s_ad, r_ad, iblt.DEFAULT_WIDTH)
    assert result.error is None
    assert [_counts(b) for b in result.buckets] == [("drift", PER_DAY, PER_DAY, PER_DAY, 0)] * DAYS
    # Per side: the first pass, then per day one wider scan and one ranged fetch.
    assert s_ad.calls[0] == f"days+cells:{iblt.DEFAULT_WIDTH}"
    again = [c for c in s_ad.calls[1:] if c.startswith("days+cells:")]
    assert len(again) == DAYS and all(int(c.split(":")[1]) > iblt.DEFAULT_WIDTH for c in again)
    assert sorted(s_ad.calls[1:]) == sorted(again + ["rows"] * DAYS)
    assert result.queries == 2 * (1 + 2 * DAYS)
    assert result.rows_fetched == DAYS * 4 * PER_DAY  # the differing rows themselves


async def test_a_first_runs_width_peels_the_same_drift_in_one_scan() -> None:
    src, rdr = _drifted()
    s_ad, r_ad = DigestMemoryAdapter(src), DigestMemoryAdapter(rdr)
    result = await _run(s_ad, r_ad, sizing.first_width(DAYS))
    assert [_counts(b) for b in result.buckets] == [("drift", PER_DAY, PER_DAY, PER_DAY, 0)] * DAYS
    # Every day peels: their differing rows come in one fetch a side (engine.peel_all).
    assert s_ad.calls == [f"days+cells:{sizing.first_width(DAYS)}", "rows"]
    assert result.queries == 2 * 2
    assert result.rows_fetched == DAYS * 4 * PER_DAY  # the differing rows themselves


class _Changing(DigestMemoryAdapter):
    """A reader that takes in one more row between the first scan and the next."""

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> DigestPass:
        got = await super().day_and_cell_digests(start, end, width)
        self.rows.append(row(f"late{len(self.calls)}", start + timedelta(hours=1)))
        return got


async def test_a_day_that_changed_before_its_second_scan_is_drilled_down_never_ok() -> None:
    src, rdr = _drifted()
    r_ad = _Changing(rdr)
    result = await _run(DigestMemoryAdapter(src), r_ad, iblt.DEFAULT_WIDTH)
    assert result.error is None
    # The second scans saw other aggregates: each day fell back to the drill-down.
    assert any(c.startswith(("slots", "prefixes")) for c in r_ad.calls)
    assert all(b.status != "ok" for b in result.buckets)


class _Capped(DigestMemoryAdapter):
    """A store that builds no day's table wider than a window's pass (as OpenSearch)."""

    widest_digest = iblt.MAX_WIDTH


async def test_a_day_beyond_the_widest_digest_is_not_scanned_again() -> None:
    src = day_rows(0, 30000)
    rdr = src[:10000]  # 20,000 missing: no table of at most 4,096 cells a sub-table peels
    s_ad = _Capped(src)
    check = make_check(drilldown="{leaf_rows: 20}")
    result = await between(
        check, s_ad, DigestMemoryAdapter(rdr), first=FirstPass(width=iblt.DEFAULT_WIDTH)
    )
    assert result.buckets[0].missing == 20000
    assert [c for c in s_ad.calls if c.startswith("days+cells")] == ["days+cells:32"]


async def test_a_window_no_day_of_which_was_judged_starts_with_day_aggregates() -> None:
    check = make_check()
    sides = (DigestMemoryAdapter([]), DigestMemoryAdapter([]))
    end = BASE + timedelta(days=40)
    settling = BucketResult(start=BASE, status="settling")
    for history in ([], [settling]):
        got = await first_pass_plan(History(history), check, sides, BASE, end, None)  # type: ignore[arg-type]
        # Nothing known: the floor first, digests only for the days that then differ.
        assert got == FirstPass(False, None, rescan=True, day_drift={})
    drifted = BucketResult(start=BASE, status="drift", missing=3, extra=1)
    one_day = BASE + timedelta(days=1)
    got = await first_pass_plan(History([drifted]), check, sides, BASE, one_day, None)  # type: ignore[arg-type]
    assert got == FirstPass(False, iblt.DEFAULT_WIDTH)  # a stored verdict sizes it, however small
    # Over 40 days that one drifted day is few: days only, and that day scanned alone.
    got = await first_pass_plan(History([drifted]), check, sides, BASE, end, None)  # type: ignore[arg-type]
    assert got == FirstPass(False, None, rescan=True, day_drift={BASE: StoredDrift(4)})
