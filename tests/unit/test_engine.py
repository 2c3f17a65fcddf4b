"""Engine unit tests on the in-memory adapter: every drift class and the drill-down economy."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from driftgauge.core.errors import StoreUnavailable
from driftgauge.encoding import digest
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import MemoryAdapter

from .engine_helpers import BASE, NOW, between, changed, day_rows, key_of, make_check, relabel, row


class DaysOnly(MemoryAdapter):
    """A memory adapter that cannot return slots in its first pass (a store without it)."""

    day_and_slot_digests = None  # type: ignore[assignment]


async def run(
    source: list[RowHash],
    reader: list[RowHash],
    days: int = 3,
    check_kw: dict[str, str] | None = None,
    **kw: object,
) -> RunResult:
    check = make_check(**(check_kw or {}))
    return await between(check, MemoryAdapter(source), MemoryAdapter(reader), days, **kw)  # type: ignore[arg-type]


async def test_identical_sides_are_ok_and_cost_one_query_per_side() -> None:
    rows = day_rows(0, 300) + day_rows(1, 300) + day_rows(2, 300)
    src, rdr = MemoryAdapter(list(rows)), MemoryAdapter(list(rows))
    result = await between(make_check(), src, rdr, 3)
    assert [b.status for b in result.buckets] == ["ok", "ok", "ok"]
    assert [b.expected for b in result.buckets] == [300, 300, 300]
    assert [b.visible for b in result.buckets] == [300, 300, 300]
    assert src.calls == ["buckets:day"] and rdr.calls == ["buckets:day"]
    assert result.queries == 2
    again = await between(make_check(), src, rdr, 3, first=FirstPass(slots=True))
    assert [b.to_dict() for b in again.buckets] == [b.to_dict() for b in result.buckets]
    assert src.calls[1:] == ["days+slots:60"] and rdr.calls[1:] == ["days+slots:60"]
    assert again.queries == 2


async def test_long_windows_and_stores_without_slots_take_days_only() -> None:
    rows = day_rows(0, 300) + day_rows(1, 300) + day_rows(2, 300)
    check = make_check(drilldown="{slot_first_pass_days: 2}")
    src, rdr = MemoryAdapter(list(rows)), DaysOnly(list(rows))
    result = await between(check, src, rdr, 3, first=FirstPass(slots=True))
    assert [b.status for b in result.buckets] == ["ok", "ok", "ok"]
    assert src.calls == ["buckets:day"] and rdr.calls == ["buckets:day"]
    result = await between(make_check(), src, rdr, first=FirstPass(slots=True))
    assert src.calls[-1] == "days+slots:60" and rdr.calls[-1] == "buckets:day"
    # A window starting off the minute cannot share slots with the days' own: days only.
    odd = BASE + timedelta(seconds=7, microseconds=1)
    result = await reconcile(
        make_check(), src, src, odd, BASE + timedelta(days=1), now=NOW, first=FirstPass(slots=True)
    )
    assert src.calls[-1] == "buckets:day" and result.error is None


async def test_each_drift_class_is_counted_on_its_day() -> None:
    src = day_rows(0, 200) + day_rows(1, 200) + day_rows(2, 200)
    rdr = list(src)
    lost = rdr.pop(10)  # day 0: missing
    rdr[250] = relabel(rdr[250], "wrong")  # day 1: mismatched
    rdr.append(row("ghost", BASE + timedelta(days=2, hours=3)))  # day 2: extra
    result = await run(src, rdr)
    got = [(b.missing, b.extra, b.mismatched) for b in result.buckets]
    assert got == [(1, 0, 0), (0, 0, 1), (0, 1, 0)]
    assert [b.status for b in result.buckets] == ["drift"] * 3
    assert result.buckets[0].samples[0].key == lost.key
    assert result.buckets[0].samples[0].kind == "missing"


async def test_missing_and_extra_in_one_bucket_do_not_cancel() -> None:
    src = day_rows(0, 400)
    rdr = list(src)
    rdr[5] = row("impostor", src[5].event_time)  # same count, different key
    result = await run(src, rdr, days=1)
    b = result.buckets[0]
    assert b.source.count == b.reader.count
    assert (b.missing, b.extra, b.mismatched) == (1, 1, 0)
    assert b.status == "drift"


async def test_duplicates_on_reader_side_are_mismatched() -> None:
    src = day_rows(0, 300)
    rdr = [*src, src[7], src[7]]  # three copies of one row
    result = await run(src, rdr, days=1)
    b = result.buckets[0]
    assert (b.missing, b.extra, b.mismatched, b.duplicates) == (0, 0, 1, 1)
    assert b.visible == 300  # distinct keys the reader can see
    assert b.reader.count == 302


async def test_duplicates_on_both_sides_are_seen_through_distinct_keys() -> None:
    src = day_rows(0, 300)
    src_dup = [*list(src), src[3]]
    rdr_dup = [*list(src), src[3]]
    result = await run(src_dup, rdr_dup, days=1)
    b = result.buckets[0]
    # Both sides agree row for row, yet the key has two copies: still a mismatch,
    # seen because the count of rows exceeds the count of distinct keys.
    assert b.source.same_as(b.reader)
    assert b.source.count == 301 and b.source.distinct_keys == 300
    assert (b.mismatched, b.duplicates, b.status) == (1, 1, "drift")
    extra_copy = [*list(src), src[3], src[3]]
    result = await run(src_dup, extra_copy, days=1)
    assert result.buckets[0].mismatched == 1 and result.buckets[0].duplicates == 1


async def test_sparse_drift_is_found_by_time_slot_and_fetches_few_rows() -> None:
    src = day_rows(0, 2400)
    rdr = changed(src, 100)
    src_ad, rdr_ad = MemoryAdapter(src), MemoryAdapter(rdr)
    check = make_check(drilldown="{leaf_rows: 50, max_depth: 4}")
    result = await between(check, src_ad, rdr_ad)
    b = result.buckets[0]
    assert b.mismatched == 1
    assert result.rows_fetched < 2 * 10  # one short slot per side, not the day
    assert src_ad.calls[0] == "buckets:day" and src_ad.calls[1].startswith("slots:")
    hours = [n for n in b.tree if n.level == "hour"]
    assert len(hours) == 24 and sum(h.source.count for h in hours) == 2400
    bad_hours = [h for h in hours if h.differs]
    assert len(bad_hours) == 1 and bad_hours[0].fetched
    # With slots from the first scan: the same answer and no second hashing pass.
    src_ad.calls.clear()
    again = await between(check, src_ad, rdr_ad, first=FirstPass(slots=True))
    assert src_ad.calls == ["days+slots:60", "rows"]
    assert again.buckets[0].mismatched == 1 and again.rows_fetched < 2 * 10
    assert [h.label for h in again.buckets[0].tree if h.differs] == [bad_hours[0].label]


async def test_slots_come_from_a_second_query_where_the_first_pass_had_none() -> None:
    src = day_rows(0, 2400)
    rdr = changed(src, 100, 2000)
    # (source, reader, first pass with slots allowed, is the source asked for slots?)
    cases = (
        (MemoryAdapter(src), DaysOnly(rdr), True, False),
        (DaysOnly(src), DaysOnly(rdr), True, True),
        (MemoryAdapter(src), MemoryAdapter(rdr), False, True),
    )
    for src_ad, rdr_ad, allowed, src_asked in cases:
        days = 62 if allowed else 0
        check = make_check(drilldown=f"{{leaf_rows: 50, slot_first_pass_days: {days}}}")
        result = await between(check, src_ad, rdr_ad, first=FirstPass(slots=True))
        b = result.buckets[0]
        assert (b.missing, b.extra, b.mismatched) == (0, 0, 2)
        assert sorted(str(k.key) for k in b.samples) == sorted(
            [key_of(src[100]), key_of(src[2000])]
        )
        assert result.rows_fetched < 2 * 20
        assert any(c.startswith("slots:") for c in rdr_ad.calls)
        # A side whose first pass returned the day's slots is not asked for them again.
        assert any(c.startswith("slots:") for c in src_ad.calls) == src_asked


async def test_rows_sharing_one_timestamp_fall_back_to_key_prefixes() -> None:
    when = BASE + timedelta(hours=2)
    src = [row(f"batch-{i}", when) for i in range(600)]  # one bulk load, one timestamp
    rdr = changed(src, 123)
    src_ad, rdr_ad = MemoryAdapter(src), MemoryAdapter(rdr)
    check = make_check(drilldown="{leaf_rows: 50, max_depth: 4}")
    result = await between(check, src_ad, rdr_ad)
    b = result.buckets[0]
    assert b.mismatched == 1 and b.samples[0].key == "batch-123"
    assert any(c.startswith("prefixes:") for c in src_ad.calls)
    assert result.rows_fetched < 2 * 50
    bad = [h for h in b.tree if h.differs]
    assert len(bad) == 1 and bad[0].children and all(c.level == "prefix" for c in bad[0].children)


async def test_keys_held_twice_are_drilled_by_prefixes_of_the_whole_day() -> None:
    src = day_rows(0, 2400)
    rdr = [*src, src[100]]  # an appending retry: one key twice
    src_ad, rdr_ad = MemoryAdapter(src), MemoryAdapter(rdr)
    check = make_check(drilldown="{leaf_rows: 50, max_depth: 4}")
    result = await between(check, src_ad, rdr_ad)
    b = result.buckets[0]
    assert (b.mismatched, b.duplicates) == (1, 1)
    assert "buckets:hour" in src_ad.calls and not any(c.startswith("slots:") for c in src_ad.calls)
    assert any(c.startswith("prefixes:") for c in src_ad.calls)
    # The prefixes split the whole day (top level), not each differing hour.
    assert any(n.level == "prefix" for n in b.tree)
    assert not any(h.children for h in b.tree if h.level == "hour")


async def test_identical_copies_in_two_hours_are_one_mismatched_duplicate() -> None:
    # Both sides hold the same two copies of `dup`, at 10:00 and 15:00: each hour holds
    # one copy and agrees, so only a whole-day split keeps the copies together.
    base = [row(f"k{i}", BASE + timedelta(hours=i + 1)) for i in range(3)]
    dup = [row("dup", BASE + timedelta(hours=10)), row("dup", BASE + timedelta(hours=15))]
    result = await run(
        [*base, *dup], [*base, *dup], days=1, check_kw={"drilldown": "{leaf_rows: 2}"}
    )
    b = result.buckets[0]
    assert (b.missing, b.extra, b.mismatched, b.duplicates) == (0, 0, 1, 1), b.reasons
    assert b.status == "drift" and b.samples[0].key == "dup"


async def test_a_row_moved_into_a_slot_split_by_prefix_is_not_drift() -> None:
    # 600 rows share 02:00 (a slot too big to fetch, split by prefix); the reader holds
    # a row of another slot at 02:00 too. Its key is in both slots' fetches: no drift.
    same = [row(f"batch-{i}", BASE + timedelta(hours=2)) for i in range(600)]
    spread = day_rows(0, 600)
    src = [*same, *spread]
    rdr = [*same, *spread]
    rdr[600 + 300] = row(key_of(spread[300]), BASE + timedelta(hours=2))  # moved
    rdr[600 + 500] = relabel(rdr[600 + 500], "changed")  # drilled day
    result = await run(src, rdr, days=1, check_kw={"drilldown": "{leaf_rows: 50}"})
    b = result.buckets[0]
    assert (b.missing, b.extra, b.mismatched, b.duplicates) == (0, 0, 1, 0), b.reasons
    assert b.status == "drift" and [k.key for k in b.samples] == [spread[500].key]


async def test_dense_drift_goes_straight_to_rows() -> None:
    src = day_rows(0, 1000)
    rdr = src[:500]  # half the day never arrived
    src_ad, rdr_ad = MemoryAdapter(src), MemoryAdapter(rdr)
    result = await between(make_check(), src_ad, rdr_ad)
    assert result.buckets[0].missing == 500
    assert src_ad.calls == ["buckets:day", "rows"]
    assert any(n.level == "hour" and n.differs for n in result.buckets[0].tree)


async def test_drift_in_many_hours_is_found_exactly() -> None:
    src = day_rows(0, 4800)
    rdr = changed(src, *range(0, 4800, 97), label="x")  # ~50 changes spread over every hour
    del rdr[4799]
    result = await run(src, rdr, days=1, check_kw={"drilldown": "{leaf_rows: 100}"})
    b = result.buckets[0]
    assert b.mismatched == len(range(0, 4800, 97))
    assert b.missing == 1
    assert result.rows_fetched < 4800 // 4  # a few short slots, never the whole day


async def test_rule_exclusions_are_counted_not_missing() -> None:
    src = day_rows(0, 100)
    when = BASE + timedelta(hours=5)
    excluded = [(when, "no_join_key")] * 40
    check = make_check()
    result = await between(check, MemoryAdapter(src, excluded=excluded), MemoryAdapter(src))
    b = result.buckets[0]
    assert (b.expected, b.visible, b.excluded, b.missing) == (140, 100, {"no_join_key": 40}, 0)
    assert b.expected == b.visible + b.excluded_total
    assert b.status == "ok"


async def test_exclusion_rate_over_its_limit_is_drift() -> None:
    src = day_rows(0, 100)
    excluded = [(BASE + timedelta(hours=1), "no_join_key")] * 200  # 2/3 of expected
    check = make_check(tolerance="{exclusion_rate: {no_join_key: 0.5}}")
    result = await between(check, MemoryAdapter(src, excluded=excluded), MemoryAdapter(src))
    b = result.buckets[0]
    assert b.status == "drift" and "excluded[no_join_key]" in b.reasons[0]


async def test_ledger_exclusions_turn_missing_into_excluded() -> None:
    src = day_rows(0, 100)
    rdr = src[3:]
    ledger = {r.key: "no_document" for r in src[:2]}  # the job explained two of three
    result = await run(src, rdr, days=1, ledger_excluded=ledger)
    b = result.buckets[0]
    assert b.excluded == {"no_document": 2} and b.missing == 1
    assert b.ledger_excluded == {"no_document": 2}


async def test_settling_bucket_never_drifts() -> None:
    src = day_rows(0, 100)
    check = make_check(settle="2h")
    now = BASE + timedelta(days=1, hours=1)  # day 0 ended one hour ago
    result = await between(check, MemoryAdapter(src), MemoryAdapter([]), now=now)
    assert result.buckets[0].status == "settling"
    assert result.buckets[0].missing == 0
    later = await between(
        check, MemoryAdapter(src), MemoryAdapter([]), now=now + timedelta(hours=2)
    )
    assert later.buckets[0].status == "drift" and later.buckets[0].missing == 100


async def test_missing_ratio_tolerance_edges() -> None:
    src = day_rows(0, 100)
    rdr = src[2:]  # 2% missing
    at_limit = await run(src, rdr, days=1, check_kw={"tolerance": "{missing_ratio: 0.02}"})
    assert at_limit.buckets[0].status == "ok" and at_limit.buckets[0].missing == 2
    below = await run(src, rdr, days=1, check_kw={"tolerance": "{missing_ratio: 0.019}"})
    assert below.buckets[0].status == "drift"


async def test_extra_and_mismatched_tolerances() -> None:
    src = day_rows(0, 100)
    rdr = [*list(src), row("x1", BASE), row("x2", BASE)]
    ok = await run(src, rdr, days=1, check_kw={"tolerance": "{extra: 2}"})
    assert ok.buckets[0].status == "ok"
    bad = await run(src, rdr, days=1, check_kw={"tolerance": "{extra: 1}"})
    assert bad.buckets[0].status == "drift"


async def test_empty_days_are_reported_as_ok_zero() -> None:
    result = await run(day_rows(1, 10), day_rows(1, 10), days=3)
    assert [b.expected for b in result.buckets] == [0, 10, 0]
    assert [b.status for b in result.buckets] == ["ok", "ok", "ok"]


async def test_store_failure_is_an_error_run_with_no_buckets() -> None:
    reader = MemoryAdapter([], fail_with=StoreUnavailable("search", "connection refused"))
    result = await between(make_check(), MemoryAdapter(day_rows(0, 10)), reader)
    assert result.status == "error" and result.buckets == []
    assert result.error is not None and "connection refused" in result.error


async def test_day_buckets_follow_the_check_time_zone() -> None:
    tz_check = make_check(tz="America/New_York")
    # 03:00 UTC on Mar 2 is 22:00 on Mar 1 in New York.
    r = row("late", BASE + timedelta(days=1, hours=3))
    result = await between(
        tz_check,
        MemoryAdapter([r], timezone=tz_check.timezone),
        MemoryAdapter([], timezone=tz_check.timezone),
        2,
    )
    with_rows = [b for b in result.buckets if b.expected]
    assert len(with_rows) == 1
    assert with_rows[0].start.date().isoformat() == "2026-03-01"
    assert with_rows[0].missing == 1


async def test_progress_reports_every_day() -> None:
    seen: list[tuple[int, int]] = []
    await run(day_rows(0, 5), day_rows(0, 5), days=4, progress=lambda d, t: seen.append((d, t)))
    assert sorted(seen) == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_results_serialise_digests_as_hex() -> None:
    from driftgauge.core.aggregate import Aggregate
    from driftgauge.engine.result import BucketResult

    b = BucketResult(BASE, "ok", source=Aggregate(1, 1, (1 << 64) - 1))
    assert b.to_dict()["source"]["digest"] == "ffffffffffffffff"
    assert dataclasses.asdict(b)["source"]["digest"] == (1 << 64) - 1


def _keyed(key: str | None, label: str, minute: int) -> RowHash:
    """Return a row hashed as the stores hash it, so a NULL key and "" hash apart."""
    kh, rh = digest.hash_row(key, "string", [label], ["string"])
    return RowHash(key, kh, rh, BASE + timedelta(minutes=minute))


async def test_a_null_key_and_the_key_empty_are_two_keys() -> None:
    src = [_keyed(None, "a", 1), _keyed("x", "a", 2)]
    rdr = [_keyed("", "a", 1), _keyed("x", "a", 2)]
    b = (await run(src, rdr, days=1)).buckets[0]
    assert (b.missing, b.extra, b.mismatched, b.duplicates) == (1, 1, 0, 0), b.reasons
    assert {(k.kind, k.key) for k in b.samples} == {("missing", None), ("extra", "")}
    both = [_keyed(None, "a", 1), _keyed("", "b", 2), _keyed("x", "c", 3)]
    changed = [*both[:2], _keyed("x", "changed", 3)]
    b = (await run(both, changed, days=1)).buckets[0]
    assert (b.mismatched, b.duplicates, b.status) == (1, 0, "drift"), b.reasons
