"""Pair both sides' hour and key-hash prefix aggregates into drill-down nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal

from driftgauge.config.frozen import Check
from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate
from driftgauge.engine.result import Node
from driftgauge.engine.sides import utc
from driftgauge.stores.base import BucketDigest, RowHash

Slot = tuple[datetime, Aggregate, Aggregate]
"""A slot's UTC start and both sides' aggregates of it."""


def hours_from_slots(check: Check, day: datetime, slots: list[Slot]) -> list[Node]:
    """Sum slots into hour nodes (exact: the day holds no key twice, so keys add up).

    Slots are aligned on the day's start and divide an hour, and hours are whole hours
    of elapsed time from that start, so each slot lies in one hour: plain arithmetic,
    no zone lookup per slot.
    """
    acc: dict[datetime, list[int]] = {}
    for k, s_a, r_a in slots:
        t = acc.setdefault(day + (k - day) // buckets.HOUR * buckets.HOUR, [0, 0, 0, 0, 0, 0])
        t[0] += s_a.count
        t[1] += s_a.distinct_keys
        t[2] += s_a.digest
        t[3] += r_a.count
        t[4] += r_a.distinct_keys
        t[5] += r_a.digest
    mod = 1 << 64
    s_tot, r_tot = _hour_totals(day, slots, 1), _hour_totals(day, slots, 2)
    return [
        Node(
            "hour",
            buckets.label(h, check.timezone),
            Aggregate(t[0], t[1], t[2] % mod, s_tot.get(h) if s_tot else None),
            Aggregate(t[3], t[4], t[5] % mod, r_tot.get(h) if r_tot else None),
        )
        for h, t in sorted(acc.items())
    ]


def _hour_totals(
    day: datetime, slots: list[Slot], side: int
) -> dict[datetime, dict[str, Decimal]] | None:
    """Sum one side's slot totals per hour; None when some slot was not summed."""
    out: dict[datetime, dict[str, Decimal]] = {}
    for k, s_a, r_a in slots:
        agg = s_a if side == 1 else r_a
        hour = out.setdefault(day + (k - day) // buckets.HOUR * buckets.HOUR, {})
        if agg.count == 0 and agg.measures is None:
            continue  # the side has no rows in this slot
        if agg.measures is None:
            return None
        for name, total in agg.measures.items():
            hour[name] = hour.get(name, Decimal(0)) + total
    return out if any(out.values()) else None


def prefix_nodes(s_pre: Mapping[str, Aggregate], r_pre: Mapping[str, Aggregate]) -> list[Node]:
    """Pair both sides' prefix aggregates into nodes, a side without the prefix as empty."""
    return [
        Node("prefix", p, s_pre.get(p, Aggregate()), r_pre.get(p, Aggregate()))
        for p in sorted(s_pre.keys() | r_pre.keys())
    ]


def _hour_nodes(
    check: Check,
    s_by: Mapping[datetime, Aggregate],
    r_by: Mapping[datetime, Aggregate],
    *,
    fetched: bool = False,
) -> list[Node]:
    """Pair both sides' hour aggregates into nodes, a side without the hour as empty."""
    return [
        Node(
            "hour",
            buckets.label(k, check.timezone),
            s_by.get(k, Aggregate()),
            r_by.get(k, Aggregate()),
            fetched=fetched,
        )
        for k in sorted(s_by.keys() | r_by.keys())
    ]


def pair_hours(
    check: Check, s_hours: list[BucketDigest], r_hours: list[BucketDigest]
) -> list[Node]:
    """Pair both sides' hour buckets into nodes."""
    s_by = {utc(b.start): b.agg for b in s_hours}
    r_by = {utc(b.start): b.agg for b in r_hours}
    return _hour_nodes(check, s_by, r_by)


def hours_from_rows(
    check: Check, parts: Iterable[tuple[Sequence[RowHash], Sequence[RowHash]]]
) -> list[Node]:
    """Build hour nodes from fetched rows, so a dense day still has a drill-down tree.

    The rows come a partition at a time, each holding every row of its keys: an hour's
    distinct keys are the sum of its distinct keys in each partition.
    """
    acc: tuple[dict[datetime, list[int]], dict[datetime, list[int]]] = ({}, {})
    for rows_of_part in parts:
        for side, rows in zip(acc, rows_of_part, strict=True):
            keys: dict[datetime, set[str]] = {}
            for r in rows:
                h = buckets.hour_start(r.event_time, check.timezone)
                t = side.setdefault(h, [0, 0, 0])
                t[0] += 1
                t[2] = (t[2] + r.row_hash) % (1 << 64)
                keys.setdefault(h, set()).add(r.key_hash)
            for h, ks in keys.items():
                side[h][1] += len(ks)

    def aggs(side: dict[datetime, list[int]]) -> dict[datetime, Aggregate]:
        return {h: Aggregate(c, k, d) for h, (c, k, d) in side.items()}

    return _hour_nodes(check, aggs(acc[0]), aggs(acc[1]), fetched=True)
