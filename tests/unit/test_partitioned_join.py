"""A join partition by partition (rows spilled to disk) finds exactly what one join finds."""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal

import pytest

from driftgauge.engine import join
from driftgauge.engine.join import LeafDiff, Partitioned, join_partitioned, join_rows
from driftgauge.engine.strategy import FirstPass
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import MemoryAdapter

from .engine_helpers import BASE, between, make_check, row


def _sides(rng: random.Random, n: int) -> tuple[list[RowHash], list[RowHash], dict[str, str]]:
    """Return random source and reader rows: missing, extra, mismatched, copies, NULL keys."""
    source: list[RowHash] = []
    reader: list[RowHash] = []
    excused: dict[str, str] = {}
    for i in range(n):
        key = f"k{i}"
        when = BASE + timedelta(microseconds=rng.randrange(86_400 * 10**6))
        r = row(key, when)
        fate = rng.random()
        if fate < 0.6:
            source.append(r)
            reader.append(r)
        elif fate < 0.7:
            source.append(r)
            if rng.random() < 0.3:
                excused[key] = "no_match"
        elif fate < 0.8:
            reader.append(r)
        elif fate < 0.9:
            source.append(r)
            moved = when + timedelta(seconds=rng.randrange(-3600, 3600))
            reader.append(row(key, moved, "changed"))
        else:
            # Copies of a key, on one side or both, alike or not.
            for _ in range(rng.randrange(1, 4)):
                source.append(r)
            for _ in range(rng.randrange(0, 3)):
                reader.append(r if rng.random() < 0.5 else row(key, when, "other"))
    measured = RowHash(None, "0" * 32, 7, BASE, {"amount": Decimal("1.5")})
    source.append(measured)
    rng.shuffle(source)
    rng.shuffle(reader)
    return source, reader, excused


def _view(d: LeafDiff) -> tuple[object, ...]:
    keys = sorted(
        d.keys, key=lambda k: (k.key_hash or "", k.kind, k.source_copies, k.reader_copies)
    )
    return (
        d.missing,
        d.extra,
        d.mismatched,
        d.duplicates,
        d.excluded,
        d.found,
        d.source_copies,
        d.reader_copies,
        d.unexplained,
        keys,
    )


@pytest.mark.parametrize("seed", range(6))
def test_partitioned_join_equals_one_join(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A small buffer, so most rows go through the spill file and come back.
    monkeypatch.setattr(join, "HOLD_ROWS", 97)
    rng = random.Random(seed)
    source, reader, excused = _sides(rng, rng.randrange(500, 3000))
    want = join_rows(source, reader, excused)
    for parts in (1, 2, 16, 64):
        with Partitioned(parts) as rows:
            for r in source:
                rows.add(r, 1)
            for r in reader:
                rows.add(r, -1)
            got = join_partitioned(rows, excused)
            assert rows.rows == [len(source), len(reader)]
            back = sorted(
                (r for s, rd in rows.each() for r in [*s, *rd]),
                key=lambda r: (r.key_hash, r.row_hash, r.event_time),
            )
        assert _view(got) == _view(want)
        assert back == sorted(
            [*source, *reader], key=lambda r: (r.key_hash, r.row_hash, r.event_time)
        )
    assert want.missing and want.extra and want.mismatched and want.duplicates


def test_partitions_hold_about_part_rows() -> None:
    assert join.partitions_for(0) == 1
    assert join.partitions_for(join.PART_ROWS) == 1
    assert join.partitions_for(join.PART_ROWS + 1) == 2
    assert join.partitions_for(250_000) * join.PART_ROWS >= 250_000
    assert join.partitions_for(250_000) < 2 * 250_000 / join.PART_ROWS


def test_each_partition_holds_every_copy_of_its_keys() -> None:
    rng = random.Random(9)
    source, reader, _ = _sides(rng, 2000)
    with Partitioned(32) as rows:
        for r in source:
            rows.add(r, 1)
        for r in reader:
            rows.add(r, -1)
        seen: dict[str, int] = {}
        for part, (s, rd) in enumerate(rows.each()):
            assert len(s) < len(source) and len(rd) < len(reader)
            for r in [*s, *rd]:
                assert seen.setdefault(r.key_hash, part) == part


def _scenario(rng: random.Random) -> tuple[list[RowHash], list[RowHash]]:
    """Return three days: dense drift, keys held twice, rows moved in time, sparse drift."""
    source: list[RowHash] = []
    reader: list[RowHash] = []
    for day in range(3):
        start = BASE + timedelta(days=day)
        for i in range(600):
            when = start + timedelta(seconds=rng.randrange(86_400))
            r = row(f"d{day}-{i}", when)
            fate = rng.random() * (1 if day == 0 else 0.2)
            source.append(r)
            if fate < 0.05:
                continue  # missing
            if fate < 0.10:
                reader.append(row(f"d{day}-{i}", when, "changed"))
            elif fate < 0.13:
                reader.append(row(f"d{day}-{i}", when + timedelta(minutes=90), "moved"))
            else:
                reader.append(r)
            if day == 1 and fate > 0.19:
                source.append(r)  # a key held twice on the source
        for j in range(40 if day == 0 else 3):
            reader.append(row(f"x{day}-{j}", start + timedelta(seconds=rng.randrange(86_400))))
    return source, reader


@pytest.mark.parametrize("seed", range(2))
async def test_a_day_drilled_through_spilled_partitions_is_judged_alike(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, reader = _scenario(random.Random(seed))

    async def judged(leaf_rows: int) -> list[tuple[str, int, int, int, int, object, object]]:
        got = await between(
            make_check(drilldown=f"{{leaf_rows: {leaf_rows}}}"),
            MemoryAdapter(source),
            MemoryAdapter(reader),
            3,
            first=FirstPass(slots=True),
        )
        assert got.error is None
        return [
            (b.status, b.missing, b.extra, b.mismatched, b.duplicates, b.samples, b.tree)
            for b in got.buckets
        ]

    whole = {n: await judged(n) for n in (50, 5000)}
    spills = 0
    flush = Partitioned._flush

    def counted(self: Partitioned) -> None:
        nonlocal spills
        spills += 1
        flush(self)

    monkeypatch.setattr(join, "PART_ROWS", 64)
    monkeypatch.setattr(join, "HOLD_ROWS", 50)
    monkeypatch.setattr(Partitioned, "_flush", counted)
    for n, want in whole.items():
        assert await judged(n) == want
    assert spills > 10
    assert whole[50][0][1] > 10 and whole[50][1][4] > 0
