"""A first pass split into range queries of whole days, and its parts merged back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import pairwise
from typing import TypeVar
from zoneinfo import ZoneInfo

from driftgauge.engine.plan import next_day
from driftgauge.stores.base import DigestPass, SlotPass

V = TypeVar("V")


def split_days(
    start: datetime, end: datetime, zone: ZoneInfo, parts: int, slot: int
) -> list[tuple[datetime, datetime]]:
    """Return [start, end) cut at local midnights into at most `parts` runs of whole days.

    Each day lies in exactly one part, so the parts' day buckets are the window's. A cut
    must keep the parts' slots (of `slot` seconds, aligned on each part's start) on the
    window's grid: a start off that grid is not cut at all.
    """
    midnights: list[datetime] = []
    day = next_day(start, zone)
    while day < end:
        midnights.append(day)
        day = next_day(day, zone)
    step = timedelta(seconds=slot)
    if parts < 2 or not midnights or any((m - start) % step for m in midnights):
        return [(start, end)]
    days = len(midnights) + 1
    parts = min(parts, days)
    # Part i holds days [i * days // parts, (i + 1) * days // parts): sizes differ by one.
    cuts = [midnights[i * days // parts - 1] for i in range(1, parts)]
    bounds = [start, *cuts, end]
    return list(pairwise(bounds))


class Merged(Mapping[datetime, V]):
    """The union of the parts' per-day mappings (their days never overlap), read lazily.

    A part's mapping may build a day's value only when it is looked up (stores.base
    LazySlots): merging must not look every day up.
    """

    def __init__(self, parts: Sequence[Mapping[datetime, V]]) -> None:
        self._where = {day: part for part in parts for day in part}

    def __getitem__(self, day: datetime) -> V:
        return self._where[day][day]

    def __iter__(self) -> Iterator[datetime]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def merge_first(parts: Sequence[tuple[SlotPass, bool]]) -> tuple[SlotPass, bool]:
    """Return one first pass from its parts: their days, their slots, slots only if all had."""
    days = [b for fp, _ in parts for b in fp.days]
    return SlotPass(days, Merged([fp.slots for fp, _ in parts])), all(h for _, h in parts)


def merge_digests(parts: Sequence[DigestPass]) -> DigestPass:
    """Return one digest pass from its parts: their days and their days' tables."""
    return DigestPass([b for dp in parts for b in dp.days], Merged([dp.tables for dp in parts]))
