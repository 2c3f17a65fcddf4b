"""Difference digests: the peel is exact or refuses, and the engine finds what drill-down finds."""

from __future__ import annotations

import random
from datetime import timedelta

from driftgauge.encoding import iblt
from driftgauge.encoding.digest import epoch_micros
from driftgauge.engine.plan import StoredDrift
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import BucketResult, RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.jobs.first_pass import first_pass_plan
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import (
    BASE,
    NOW,
    Costs,
    History,
    between,
    changed,
    day_rows,
    key_of,
    make_check,
    row,
)

MOD = 1 << 64


def _pairs(rng: random.Random, n: int) -> list[tuple[int, int]]:
    return [(rng.getrandbits(64), rng.randrange(-(10**15), 10**15)) for _ in range(n)]


def test_check_hash_is_not_additive_and_fits_a_signed_bigint() -> None:
    rng = random.Random(1)
    for _ in range(2000):
        a, b = rng.getrandbits(64), rng.getrandbits(64)
        h = iblt.check_hash(a)
        assert 0 <= h < 1 << 63
        assert iblt.check_hash((a + b) % MOD) != (h + iblt.check_hash(b)) % MOD


def test_positions_are_one_per_sub_table() -> None:
    rng = random.Random(2)
    for width in (16, 17, 100, 4096):
        for _ in range(200):
            cells = iblt.positions(rng.getrandbits(64), width)
            assert [c // width for c in cells] == list(range(iblt.K))


def test_peel_returns_exactly_the_rows_only_one_side_holds() -> None:
    rng = random.Random(3)
    refused = 0
    for _ in range(50):
        common = _pairs(rng, 500)
        only_s, only_r = _pairs(rng, rng.randrange(0, 40)), _pairs(rng, rng.randrange(0, 40))
        width = iblt.width_for(len(only_s) + len(only_r))
        diff = iblt.subtract(iblt.build(common + only_s, width), iblt.build(common + only_r, width))
        got = iblt.peel(diff, width)
        if got is None:
            refused += 1  # a small table can hold a cycle no peel opens
            continue
        assert sorted((e.row_hash, e.micros, e.sign) for e in got) == sorted(
            [(h, t, 1) for h, t in only_s] + [(h, t, -1) for h, t in only_r]
        )
    assert refused <= 3


def test_equal_sides_peel_to_nothing() -> None:
    rows = _pairs(random.Random(4), 300)
    assert iblt.peel(iblt.subtract(iblt.build(rows, 16), iblt.build(rows, 16)), 16) == []


def test_two_copies_of_a_row_do_not_cancel_and_are_never_named_as_one() -> None:
    (one,) = _pairs(random.Random(5), 1)
    diff = iblt.subtract(iblt.build([one, one], 16), {})
    assert diff and all(c[0] == 2 for c in diff.values())
    assert iblt.peel(diff, 16) is None


def test_an_overfull_table_is_refused_never_guessed() -> None:
    rng = random.Random(6)
    refused = 0
    for _ in range(20):
        only = _pairs(rng, 200)
        got = iblt.peel(iblt.build(only, 16), 16)
        # Either every row exactly, or nothing: never a partial or invented list.
        if got is None:
            refused += 1
        else:
            assert sorted((e.row_hash, e.micros) for e in got) == sorted(only)
    assert refused == 20


def test_a_table_not_built_by_the_rules_is_refused() -> None:
    rhash, micros = 12345, 678
    cell = (1, rhash, iblt.check_hash(rhash), micros)
    wrong = next(i for i in range(3 * 16) if i not in iblt.positions(rhash, 16))
    assert iblt.peel({wrong: cell}, 16) is None
    assert iblt.peel({10**6: cell}, 16) is None


def test_width_follows_the_drift_within_bounds() -> None:
    assert iblt.width_for(0) == iblt.MIN_WIDTH
    assert iblt.width_for(1000) == 708
    assert iblt.width_for(10**9) == iblt.MAX_WIDTH


def _moved(r: RowHash, rng: random.Random) -> RowHash:
    later = r.event_time + timedelta(seconds=rng.randrange(1, 900))
    return RowHash(r.key, r.key_hash, r.row_hash, later)


def _drifted(rng: random.Random, days: int, dups: bool) -> tuple[list[RowHash], list[RowHash]]:
    """Return a source and a reader that differ by random missing, extra, changed and moved rows."""
    src: list[RowHash] = []
    for d in range(days):
        n = rng.choice([0, 5, 60, 400])
        src += day_rows(d, n, prefix=f"k{rng.random():.6f}-")
    # Some rows share one timestamp: a ranged fetch returns their neighbours too.
    shared = BASE + timedelta(hours=5, minutes=3)
    src += [row(f"same{i}", shared) for i in range(rng.randrange(0, 6))]
    rdr = []
    for r in src:
        roll = rng.random()
        if roll < 0.05:
            continue  # missing
        if roll < 0.10:
            rdr.append(row(key_of(r), r.event_time, f"v{rng.random()}"))  # mismatched
        elif roll < 0.12:
            rdr.append(_moved(r, rng))  # the same content at another time
        else:
            rdr.append(r)
        if dups and roll > 0.995:
            rdr.append(r)  # a copy the reader holds twice
    for i in range(rng.randrange(0, 8)):
        rdr.append(row(f"extra{i}", BASE + timedelta(days=rng.randrange(days), seconds=i * 97)))
    return src, rdr


def _verdict(b: BucketResult) -> tuple[object, ...]:
    keys = sorted((k.key or "", k.kind, k.source_copies, k.reader_copies) for k in b.samples)
    return (b.start, b.status, b.missing, b.extra, b.mismatched, b.duplicates, b.reasons, keys)


async def _both(
    src: list[RowHash], rdr: list[RowHash], days: int, width: int
) -> tuple[RunResult, RunResult, DigestMemoryAdapter]:
    check = make_check(drilldown="{leaf_rows: 20}")
    end = BASE + timedelta(days=days)
    plain = await reconcile(
        check, MemoryAdapter(src), MemoryAdapter(rdr), BASE, end, now=NOW, sample_keys=10**6
    )
    s_ad = DigestMemoryAdapter(src)
    peeled = await reconcile(
        check,
        s_ad,
        DigestMemoryAdapter(rdr),
        BASE,
        end,
        now=NOW,
        sample_keys=10**6,
        first=FirstPass(width=width),
    )
    return plain, peeled, s_ad


async def test_digests_find_what_the_drill_down_finds_on_random_drift() -> None:
    rng = random.Random(7)
    peeled_days = fallbacks = 0
    for trial in range(40):
        days = rng.randrange(1, 5)
        src, rdr = _drifted(rng, days, dups=trial % 3 == 0)
        width = rng.choice([16, 64])
        plain, peeled, s_ad = await _both(src, rdr, days, width)
        assert plain.error is None and peeled.error is None
        assert [_verdict(b) for b in peeled.buckets] == [_verdict(b) for b in plain.buckets], trial
        drifted = sum(b.status != "ok" for b in peeled.buckets)
        drilled = sum(c.startswith(("slots", "prefixes", "buckets:hour")) for c in s_ad.calls)
        peeled_days += drifted - min(drilled, drifted)
        fallbacks += min(drilled, drifted)
    # Both paths were taken: most drifting days peel, crowded or duplicated ones fall back.
    assert peeled_days > 20 and fallbacks > 0


async def test_a_peeled_day_costs_one_ranged_fetch_per_side() -> None:
    src = day_rows(0, 2400)
    rdr = changed(src, 100)
    del rdr[7]
    rdr.append(row("new", BASE + timedelta(hours=3, seconds=1)))
    _, peeled, s_ad = await _both(src, rdr, 1, 16)
    (b,) = peeled.buckets
    assert (b.status, b.missing, b.extra, b.mismatched) == ("drift", 1, 1, 1)
    assert s_ad.calls == ["days+cells:16", "rows"]
    assert peeled.rows_fetched == 4  # the differing rows themselves


async def test_a_day_that_does_not_peel_is_drilled_down_the_old_way() -> None:
    src = day_rows(0, 2400)
    rdr = [relabel for relabel in src[:2000]]  # 400 missing: far over 16 cells a sub-table
    plain, peeled, s_ad = await _both(src, rdr, 1, 16)
    assert [_verdict(b) for b in peeled.buckets] == [_verdict(b) for b in plain.buckets]
    assert peeled.buckets[0].missing == 400
    assert s_ad.calls[0] == "days+cells:16" and "rows" in s_ad.calls[1:]


async def test_a_wrong_row_at_the_named_time_makes_the_day_fall_back() -> None:
    src = day_rows(0, 300)
    rdr = src[1:]

    class Lying(DigestMemoryAdapter):
        """A source whose exported rows disagree with its digests (a store answering twice)."""

        async def iter_rows(self, start, end, prefixes=None, *, ranges=None):  # type: ignore[no-untyped-def]
            async for r in super().iter_rows(start, end, prefixes, ranges=ranges):
                yield RowHash(r.key, r.key_hash, r.row_hash ^ 1, r.event_time) if ranges else r

    check = make_check(drilldown="{leaf_rows: 20}")
    s_ad = Lying(src)
    result = await between(check, s_ad, DigestMemoryAdapter(rdr), first=FirstPass(width=16))
    (b,) = result.buckets
    # The peel's fetch did not match; the drill-down that followed could not agree either.
    assert b.status != "ok"
    assert len([c for c in s_ad.calls if c == "rows"]) >= 2


def test_tables_of_memory_rows_use_epoch_microseconds() -> None:
    r = row("a", BASE + timedelta(microseconds=7))
    assert (
        iblt.build([(r.row_hash, epoch_micros(r.event_time))], 16)[
            iblt.positions(r.row_hash, 16)[0]
        ][3]
        == epoch_micros(BASE) + 7
    )


async def test_digest_sides_take_digests_for_slots_and_size_them_from_history() -> None:
    check = make_check()
    drifted = BucketResult(start=BASE, status="drift", missing=300, extra=10, mismatched=100)
    healthy = BucketResult(start=BASE, status="ok")
    sides = (DigestMemoryAdapter([]), DigestMemoryAdapter([]))
    end = BASE + timedelta(days=1)

    async def plan(history: History, pair: tuple[MemoryAdapter, MemoryAdapter]) -> object:
        return await first_pass_plan(history, check, pair, BASE, end, None)  # type: ignore[arg-type]

    assert await plan(History([drifted]), sides) == FirstPass(False, iblt.width_for(510))
    assert await plan(History([]), sides) == FirstPass(False, None, True, {})
    # Judged healthy, or history unreadable: days only, as for sides without digests.
    assert await plan(History([healthy]), sides) == FirstPass(False, None)
    assert await plan(History([], fail=True), sides) == FirstPass(False, None)
    # A side without digests keeps today's choice: slots when drift is likely.
    plain = (MemoryAdapter([]), DigestMemoryAdapter([]))
    assert await plan(History([drifted]), plain) == FirstPass(True, None)


async def test_drift_stored_in_a_few_days_plans_day_aggregates_and_a_scan_of_each() -> None:
    check = make_check()
    sides = (DigestMemoryAdapter([]), DigestMemoryAdapter([]))

    def day(d: int, drifted: bool) -> BucketResult:
        start = BASE + timedelta(days=d)
        if drifted:
            return BucketResult(start=start, status="drift", missing=5000)
        return BucketResult(start=start, status="ok")

    async def plan(days: int, drifted: int) -> object:
        history = History([day(d, d < drifted) for d in range(days)])
        end = BASE + timedelta(days=days)
        return await first_pass_plan(history, check, sides, BASE, end, None)  # type: ignore[arg-type]

    # 3 of 40 days drifted (a quarter at most): no cells for the 37 others.
    # Each drifted day's scan is sized from the rows it differed by (5,000 missing).
    for drifted in (3, 10):
        days = {BASE + timedelta(days=d): StoredDrift(5000) for d in range(drifted)}
        assert await plan(40, drifted) == FirstPass(False, None, True, days)
    # Up to 57% of the days (engine.cost): still days first, then one second pass.
    for window, drifted in ((40, 11), (40, 22), (3, 1)):
        stored = {BASE + timedelta(days=d): StoredDrift(5000) for d in range(drifted)}
        assert await plan(window, drifted) == FirstPass(False, None, True, stored)
    # More: every day's digests in the first scan cost less than days plus that pass.
    assert await plan(40, 23) == FirstPass(False, iblt.width_for(5000))
    assert await plan(3, 2) == FirstPass(False, iblt.width_for(5000))


async def test_a_calibrated_store_moves_the_planners_choice() -> None:
    check = make_check()
    sides = (DigestMemoryAdapter([]), DigestMemoryAdapter([]))

    async def plan(drifted: int, costs: Costs) -> FirstPass:
        history = History(
            [
                BucketResult(
                    start=BASE + timedelta(days=d), status="drift" if d < drifted else "ok"
                )
                for d in range(40)
            ],
            costs=costs,
        )
        return await first_pass_plan(history, check, sides, BASE, BASE + timedelta(days=40), None)  # type: ignore[arg-type]

    # 16 of 40 days (40%): below 57% at the default 2.3, days first.
    assert (await plan(16, Costs())).width is None
    # Stores whose digests cost at most 1.5x their day scan: digests first above 33%.
    cheap = Costs({"dst": 1.5, "src": 1.4})
    assert (await plan(16, cheap)).width is not None
    assert (await plan(12, cheap)).width is None
    # The slower side decides: a source at 4x keeps days first up to 75% of the days.
    slow = Costs({"dst": 1.5, "src": 4.0})
    assert (await plan(16, slow)).width is None
    assert (await plan(31, slow)).width is not None
    # Unreadable costs: the default, never a failed plan.
    assert (await plan(16, Costs({"dst": 1.5}, fail=True))).width is None
