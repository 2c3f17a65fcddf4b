"""Each judged day records the strategy that judged it and why, whichever path it took."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from driftgauge.cli.report import run_report
from driftgauge.encoding import sizing
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import BASE, NOW, day_rows, key_of, make_check, row
from .test_first_run import DAYS, PER_DAY, _drifted

LEAF = "{leaf_rows: 20}"
DRIFT = [("drift", PER_DAY, PER_DAY, PER_DAY, 0)] * DAYS


def _counts(b: BucketResult) -> tuple[object, ...]:
    return (b.status, b.missing, b.extra, b.mismatched, b.duplicates)


async def _run(source: MemoryAdapter, reader: MemoryAdapter, **plan: Any) -> RunResult:
    check = make_check(drilldown=LEAF)
    end = BASE + timedelta(days=DAYS + 1)
    result = await reconcile(check, source, reader, BASE, end, now=NOW, first=FirstPass(**plan))
    assert result.error is None
    return result


def _with_clean_day() -> tuple[list[RowHash], list[RowHash]]:
    src, rdr = _drifted()
    clean = day_rows(DAYS, 200, prefix="clean-")
    return src + clean, rdr + clean


async def test_a_clean_day_is_judged_on_its_aggregates() -> None:
    src, rdr = _with_clean_day()
    result = await _run(MemoryAdapter(src), MemoryAdapter(rdr), slots=False)
    clean = result.buckets[DAYS]
    assert clean.status == "ok"
    assert clean.strategy == "aggregates"
    assert clean.strategy_reason == "both sides' day aggregates agree"


async def test_digests_of_the_first_pass_name_their_width() -> None:
    src, rdr = _with_clean_day()
    result = await _run(DigestMemoryAdapter(src), DigestMemoryAdapter(rdr), width=256)
    drifted = result.buckets[:DAYS]
    assert {b.strategy for b in drifted} == {"digests"}
    assert all("256 cells a sub-table" in (b.strategy_reason or "") for b in drifted)
    assert result.buckets[DAYS].strategy == "aggregates"


async def test_a_day_scanned_alone_says_so() -> None:
    src, rdr = _with_clean_day()
    # Four days, three differ: too many to scan each alone (plan.few_days), so one second
    # pass scans the three (consecutive) days for their digests, one query a side ...
    s_ad, r_ad = DigestMemoryAdapter(src), DigestMemoryAdapter(rdr)
    many = await _run(s_ad, r_ad, rescan=True)
    assert [c for c in s_ad.calls if c.startswith("days+cells")] == [
        f"days+cells:{sizing.first_width(DAYS)}"
    ]
    assert [_counts(b) for b in many.buckets[:DAYS]] == DRIFT
    assert {b.strategy for b in many.buckets[:DAYS]} == {"digests"}
    assert all(
        (b.strategy_reason or "").startswith(
            "a second pass over the differing days's difference digests peeled"
        )
        for b in many.buckets[:DAYS]
    )
    # ... but one differing day of four is scanned alone.
    one_src = [r for r in src if not key_of(r).startswith(("d1-", "d2-"))]
    one_rdr = [r for r in rdr if not key_of(r).startswith(("d1-", "d2-", "x1-", "x2-"))]
    one = await _run(DigestMemoryAdapter(one_src), DigestMemoryAdapter(one_rdr), rescan=True)
    assert one.buckets[0].strategy == "day_digests"
    assert (one.buckets[0].strategy_reason or "").startswith(
        "scanned alone for its difference digests, sized to estimate its drift"
    )


async def test_stores_without_digests_drill_by_slots_and_say_why() -> None:
    src, rdr = _with_clean_day()
    result = await _run(MemoryAdapter(src), MemoryAdapter(rdr), slots=True)
    day = result.buckets[0]
    assert day.strategy == "slots"
    assert day.strategy_reason == (
        "the stores build no difference digests; drilled down by time slots the first pass returned"
    )


async def test_a_repeated_key_drills_by_prefixes() -> None:
    src, rdr = _with_clean_day()
    first = next(r for r in rdr if key_of(r).startswith("d0-"))
    twice = [*rdr, row(key_of(first), first.event_time + timedelta(minutes=1))]
    result = await _run(DigestMemoryAdapter(src), DigestMemoryAdapter(twice), width=256)
    day = result.buckets[0]
    assert day.duplicates == 1
    assert day.strategy == "drill"
    assert (day.strategy_reason or "").startswith(
        "a key repeats on a side, so digests cannot peel it"
    )


async def test_a_dense_day_reads_its_rows() -> None:
    src, rdr = _with_clean_day()
    # Two thirds of day 0 gone from the reader: the count gap says most of it differs.
    gone = {key_of(r) for r in src if key_of(r).startswith("d0-")}
    sparse = [r for i, r in enumerate(rdr) if key_of(r) not in gone or i % 3 == 0]
    result = await _run(MemoryAdapter(src), MemoryAdapter(sparse), slots=False)
    day = result.buckets[0]
    assert day.strategy == "rows"
    assert "; dense drift: the day's keys and row hashes were read" in (day.strategy_reason or "")


async def test_the_json_report_names_each_days_strategy() -> None:
    src, rdr = _with_clean_day()
    result = await _run(DigestMemoryAdapter(src), DigestMemoryAdapter(rdr), width=256)
    report = run_report(result)
    assert report["first_pass"] == "difference digests of every day (256 cells a sub-table)"
    assert [b["strategy"] for b in report["buckets"]] == ["digests"] * DAYS + ["aggregates"]
    assert all(b["strategy_reason"] for b in report["buckets"])
