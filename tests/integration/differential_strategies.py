"""Hypothesis strategies for the differential tests: data sets, drift and check settings."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from driftgauge.core.fields import KeyType
from tests.integration.differential_support import (
    KEY_PARTS,
    LABELS,
    ZONE_DAYS,
    Case,
    Pair,
    Row,
    Settings,
    anchors,
    nfd,
    reader_copy,
)

INT64 = (-(2**63), 2**63 - 1)
NUDGES = (
    timedelta(0),
    timedelta(milliseconds=1),
    timedelta(milliseconds=-1),
    timedelta(microseconds=-1),
    timedelta(seconds=1),
    timedelta(seconds=-1),
    timedelta(minutes=-30),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=-1),
    timedelta(minutes=59, seconds=59),
)
SHIFTS = (
    timedelta(milliseconds=1),
    timedelta(milliseconds=-1),
    timedelta(seconds=1),
    timedelta(minutes=30),
    timedelta(hours=-1),
    timedelta(hours=1),
    timedelta(hours=23),
    timedelta(days=1),
    timedelta(days=-1),
    timedelta(0),
)
DRIFT_KINDS = (
    "drop",
    "extra",
    "relabel",
    "requantity",
    "reseen",
    "nfd",
    "dup",
    "move",
    "src_dup",
    "src_drop",
    "src_move",
)
# Content-time changes: a microsecond (hidden under milliseconds unless it crosses one).
TICKS = (
    timedelta(microseconds=1),
    timedelta(microseconds=-1),
    timedelta(milliseconds=1),
    timedelta(seconds=-1),
)

# Excluded from the CI profile until the named fixes land on main (see the report).
KNOWN_BUGS: set[str] = set()


def string_keys() -> st.SearchStrategy[Any]:
    """Return keys built from separator, digit, emoji and NFC/NFD fragments."""
    parts = st.lists(st.sampled_from(KEY_PARTS), min_size=0, max_size=3).map("".join)
    return st.one_of(parts, st.tuples(parts, st.integers(0, 999)).map(lambda p: f"{p[0]}{p[1]}"))


def int_keys() -> st.SearchStrategy[Any]:
    """Return int64 keys, small ones and both extremes."""
    return st.one_of(st.integers(-5, 50), st.sampled_from(INT64), st.integers(*INT64))


def labels() -> st.SearchStrategy[str | None]:
    """Return labels: the interesting list, NULL, or short random text."""
    return st.one_of(
        st.sampled_from(LABELS),
        st.none(),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=4),
    )


def seen_times() -> st.SearchStrategy[datetime | None]:
    """Return content timestamps: NULL, around 1970 (floors below zero), or any microsecond."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return st.one_of(
        st.none(),
        st.integers(-3000, 3000).map(lambda us: epoch + timedelta(microseconds=us)),
        st.datetimes(datetime(1900, 1, 1), datetime(2100, 1, 1)).map(
            lambda t: t.replace(tzinfo=UTC)
        ),
    )


@st.composite
def instants(draw: st.DrawFn, marks: list[datetime], start: datetime, end: datetime) -> datetime:
    """Return an instant near a midnight or offset change, or anywhere around the window."""
    if draw(st.booleans()):
        at = draw(st.sampled_from(marks)) + draw(st.sampled_from(NUDGES))
    else:
        span = int((end - start).total_seconds()) + 7200
        at = start - timedelta(hours=1) + timedelta(seconds=draw(st.integers(0, span)))
    return at + timedelta(microseconds=draw(st.sampled_from((0, 0, 1, 999, 123_456))))


@st.composite
def settings(draw: st.DrawFn, pair: Pair) -> Settings:
    """Return drill-down and tolerance settings that push days down every path."""
    return Settings(
        leaf_rows=draw(st.sampled_from((1, 2, 3, 5, 10, 50, 2000))),
        dense_ratio=draw(st.sampled_from((0.05, 0.2, 1.0))),
        max_depth=draw(st.sampled_from((1, 2, 4))),
        slot_first_pass_days=draw(st.sampled_from((0, 62))),
        slots_first=draw(st.booleans()),
        missing_ratio=draw(st.sampled_from((0.0, 0.05, 0.5))),
        extra=draw(st.sampled_from((0, 1, 3))),
        mismatched=draw(st.sampled_from((0, 1))),
        exclusion_rate=draw(st.sampled_from((None, 0.1, 0.5))),
        shards=draw(st.sampled_from((1, 2))) if pair == "pg-os" else 1,
        reader_filter=draw(st.booleans()),
        settle_hours=draw(st.sampled_from((0, 0, 0, 0, 0, 3, 30, 80))),
        digest_width=draw(st.sampled_from((None, 16, 64))),
        days_first=draw(st.booleans()),
        rescan=draw(st.booleans()),
        parallel_scans=draw(st.sampled_from((1, 1, 3))),
    )


def filler(n: int, mode: str, key_type: str, start: datetime, end: datetime) -> list[Row]:
    """Return n plain rows: spread over the window, in one hour, or all on one instant."""
    span = (end - start).total_seconds()
    out = []
    for i in range(n):
        if mode == "spread":
            ts = start + timedelta(seconds=span * (i + 0.5) / n)
        elif mode == "hour":
            ts = start + timedelta(hours=30, seconds=3600 * i / n)
        else:
            ts = start + timedelta(hours=30, milliseconds=7)
        key = f"fill{i}" if key_type == "string" else 10**12 + i
        out.append(Row(key, f"x{i % 7}", i, ts.astimezone(UTC)))
    return out


@st.composite
def cases(draw: st.DrawFn, pair: Pair, big: bool = True) -> Case:
    """Return a data set, its healthy sync, and drift applied to it."""
    zone, day = draw(st.sampled_from(ZONE_DAYS))
    key_types: tuple[KeyType, ...] = ("string", "integer")
    key_type = draw(st.sampled_from(key_types))
    case = Case(pair, zone, day, key_type, [], [], draw(settings(pair)))
    start, end = case.window()
    marks = anchors(zone, day)
    key = string_keys() if key_type == "string" else int_keys()
    row = st.builds(
        Row,
        key=st.one_of(key, key, key, key, st.none()),
        label=labels(),
        qty=st.one_of(st.none(), st.integers(*INT64)),
        ts=instants(marks, start, end).map(lambda t: t.astimezone(UTC)),
        ckey=st.sampled_from(("c", "c", "c", None)),
        seen=seen_times(),
    )
    source = draw(st.lists(row, max_size=40))
    sizes = (0, 0, 30, 200, 1500) if big else (0, 0, 30)
    n = draw(st.sampled_from(sizes))
    if n:
        source += filler(
            n, draw(st.sampled_from(("spread", "hour", "instant"))), key_type, start, end
        )
    # The healthy sync: every row with a join key reaches the reader, as written there.
    reader = [reader_copy(r, pair) for r in source if r.ckey is not None]
    for _ in range(draw(st.integers(0, 8))):
        _drift(draw, draw(st.sampled_from(DRIFT_KINDS)), source, reader, row, pair)
    case.source, case.reader = source, reader
    return case


def _drift(
    draw: st.DrawFn,
    kind: str,
    source: list[Row],
    reader: list[Row],
    row: st.SearchStrategy[Row],
    pair: Pair,
) -> None:
    """Apply one kind of drift in place: missing, extra, mismatched, duplicated or moved rows."""
    if kind == "extra":
        reader.append(reader_copy(draw(row), pair))
        return
    side = source if kind.startswith("src_") else reader
    if not side:
        return
    i = draw(st.integers(0, len(side) - 1))
    r = side[i]
    if kind in ("drop", "src_drop"):
        del side[i]
    elif kind == "relabel":
        side[i] = replace(r, label=draw(labels()))
    elif kind == "requantity":
        side[i] = replace(r, qty=draw(st.one_of(st.none(), st.integers(*INT64))))
    elif kind == "reseen":
        seen = draw(seen_times()) if r.seen is None else r.seen + draw(st.sampled_from(TICKS))
        side[i] = (
            reader_copy(replace(r, seen=seen), pair) if side is reader else replace(r, seen=seen)
        )
    elif kind == "nfd":
        side[i] = replace(r, label=nfd(r.label))
    elif kind in ("dup", "src_dup"):
        copy = replace(r, ts=r.ts + draw(st.sampled_from(SHIFTS)))
        if draw(st.booleans()):
            copy = replace(copy, label=draw(labels()))
        side.append(reader_copy(copy, pair) if side is reader else copy)
    elif kind in ("move", "src_move"):
        moved = replace(r, ts=r.ts + draw(st.sampled_from(SHIFTS)))
        side[i] = reader_copy(moved, pair) if side is reader else moved
