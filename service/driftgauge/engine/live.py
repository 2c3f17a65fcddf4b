"""Live drill-down of one day: its hours, an hour's key-hash prefixes, and the keys."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime

from driftgauge.config.frozen import Check
from driftgauge.core import buckets
from driftgauge.core.errors import ConfigError
from driftgauge.engine import explain
from driftgauge.engine.join import Delta, join_rows
from driftgauge.engine.nodes import pair_hours, prefix_nodes
from driftgauge.engine.payloads import DrillOut
from driftgauge.engine.result import Node, sort_key
from driftgauge.engine.sides import Sides
from driftgauge.stores.base import StoreAdapter

_HEX = re.compile(r"^[0-9a-f]{1,8}$")


def _range(check: Check, day: date, hour: str | None) -> tuple[datetime, datetime]:
    start = buckets.midnight(day, check.timezone)
    if hour is None:
        return start, buckets.day_end(start, check.timezone)
    try:
        return buckets.resolve_hour(hour, day, check.timezone)
    except ValueError as exc:
        raise ConfigError([f"hour: {exc}"]) from None


async def drill_live(
    check: Check,
    source: StoreAdapter,
    reader: StoreAdapter,
    day: date,
    hour: str | None = None,
    prefix: str | None = None,
) -> DrillOut:
    """Return one level of the drill-down below (day, hour, prefix), and keys at a leaf.

    `hour` names one hour bucket of the day as buckets.resolve_hour accepts it.
    """
    if prefix is not None and not _HEX.match(prefix):
        raise ConfigError([f"prefix: {prefix!r} is not 1 to 8 lowercase hex digits"])
    start, end = _range(check, day, hour)
    if hour is None and prefix is None:
        nodes = await compare_hours(check, source, reader, start, end)
        level = "hour"
    else:
        depth = len(prefix) + 1 if prefix else 1
        within = [prefix] if prefix else None
        nodes = await compare_prefixes(check, source, reader, start, end, depth, within)
        level = "prefix"
    s_total = sum(n.source.count for n in nodes)
    r_total = sum(n.reader.count for n in nodes)
    report = DrillOut(
        check=check.name,
        day=day.isoformat(),
        hour=None if hour is None else _short(buckets.label(start, check.timezone)),
        start=buckets.label(start, check.timezone),
        end=buckets.label(end, check.timezone),
        prefix=prefix,
        level=level,
        differs=any(n.differs for n in nodes),
        nodes=[n.payload() for n in nodes],
    )
    if max(s_total, r_total) <= check.drilldown.leaf_rows and report.differs:
        within = [prefix] if prefix else None
        s_rows = [r async for r in source.iter_rows(start, end, within)]
        r_rows = [r async for r in reader.iter_rows(start, end, within)]
        diff = join_rows(s_rows, r_rows)
        want = Delta()
        for n in nodes:
            want.add(Delta.between(n.source, n.reader))
        if want != diff.found:
            # The keys listed do not add up to the nodes above them: say so, not a list.
            report.unexplained = (
                f"{explain.REASON}: the nodes differ by {want.count:+d} rows, digest "
                f"{want.digest:016x}; the keys found by {diff.found.count:+d} rows, digest "
                f"{diff.found.digest:016x}"
            )
        report.keys = [
            k.payload(check.source.composite)
            for k in sorted(diff.keys, key=lambda k: (k.kind, sort_key(k)))
        ]
    return report


def _short(label: str) -> str:
    """Return a bucket label's local time and offset (02:00+01:00), without the date."""
    return label[11:16] + label[19:]


async def compare_hours(
    check: Check, source: StoreAdapter, reader: StoreAdapter, day_start: datetime, day_end: datetime
) -> list[Node]:
    """Return both sides' hour aggregates for one day, live."""
    sides = Sides.of(check, source, reader)
    s_hours, r_hours = await sides.both(lambda s: s.buckets(day_start, day_end, "hour"))
    return pair_hours(check, s_hours, r_hours)


async def compare_prefixes(
    check: Check,
    source: StoreAdapter,
    reader: StoreAdapter,
    start: datetime,
    end: datetime,
    depth: int,
    within: Sequence[str] | None = None,
) -> list[Node]:
    """Return both sides' aggregates per key-hash prefix of [start, end), live."""
    sides = Sides.of(check, source, reader)
    s_pre, r_pre = await sides.both(lambda s: s.prefixes(start, end, depth, within))
    return prefix_nodes(s_pre, r_pre)
