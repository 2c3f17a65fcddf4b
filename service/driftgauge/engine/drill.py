"""Drill a differing day down: by slots or key-hash prefixes, to the rows of small leaves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate
from driftgauge.engine import explain, plan
from driftgauge.engine.first_pass import DaySlots
from driftgauge.engine.join import Delta, LeafDiff, deltas, join_rows
from driftgauge.engine.nodes import hours_from_rows, hours_from_slots, pair_hours, prefix_nodes
from driftgauge.engine.result import Node, needs_drill
from driftgauge.engine.sides import FIRST_PASS_SLOT, Counted, Sides, utc
from driftgauge.engine.tasks import all_or_none
from driftgauge.stores.base import BucketDigest, RowHash


@dataclass
class Fetched:
    """Rows fetched below a day, per side, joined once for the whole day.

    Joining each leaf on its own would miss a key whose rows sit in two leaves (a row
    moved between a fetched slot and a slot split by prefix): the day join sees them meet.
    """

    source: list[RowHash] = field(default_factory=list)
    reader: list[RowHash] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    """Nodes whose fetched rows do not add up to how their aggregates differ."""

    def add(self, other: Fetched) -> None:
        """Take another node's rows and problems."""
        self.source.extend(other.source)
        self.reader.extend(other.reader)
        self.unexplained.extend(other.unexplained)

    def delta(self) -> Delta:
        """Return source minus reader over every fetched row."""
        return deltas(self.source, self.reader, lambda _: None).get(None, Delta())

    def check(self, where: str, s_agg: Aggregate, r_agg: Aggregate, got: Delta) -> None:
        """Note `where` when its fetched rows differ otherwise than its aggregates do."""
        problem = explain.mismatch(where, s_agg, r_agg, got)
        if problem:
            self.unexplained.append(problem)


async def drill_day(
    sides: Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    ledger_excluded: Mapping[str, str],
    slots: DaySlots | None = None,
) -> tuple[list[Node], LeafDiff]:
    """Return the day's drill-down tree and the classified differences."""
    check = sides.check
    dd = check.drilldown
    if plan.fits_leaf(s_agg, r_agg, dd) or plan.is_dense(s_agg, r_agg, dd):
        # Dense drift or a small day: its rows cost less than walking the levels.
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, None))
        hours = hours_from_rows(check, s_rows, r_rows)
        if check.measures:
            # Rows carry no measure values: the stores' hour buckets give each hour's totals.
            s_hours, r_hours = await sides.both(lambda s: s.buckets(start, end, "hour"))
            hours = pair_hours(check, s_hours, r_hours)
            for h in hours:
                h.fetched = True
        return hours, join_day(s_agg, r_agg, Fetched(s_rows, r_rows), ledger_excluded)
    if not (s_agg.has_duplicates or r_agg.has_duplicates):
        tree, fetched = await _drill_slots(sides, start, end, s_agg, r_agg, slots)
        return tree, join_day(s_agg, r_agg, fetched, ledger_excluded)
    # A key held twice may sit in two hours or slots; only key-hash prefixes of the whole
    # day keep all its copies together. The hours are asked for the tree only.
    s_hours, r_hours = await sides.both(lambda s: s.buckets(start, end, "hour"))
    hours = pair_hours(check, s_hours, r_hours)
    est = plan.estimate_diffs(sum(h.differs for h in hours), max(len(hours), 1))
    nodes, fetched = await _drill_range(sides, start, end, s_agg, r_agg, 0, None, est)
    return hours + nodes, join_day(s_agg, r_agg, fetched, ledger_excluded)


def join_day(
    s_agg: Aggregate, r_agg: Aggregate, fetched: Fetched, ledger_excluded: Mapping[str, str]
) -> LeafDiff:
    """Join every row fetched for the day at once; check the copies found add up."""
    diff = join_rows(fetched.source, fetched.reader, ledger_excluded)
    diff.unexplained.extend(fetched.unexplained)
    # Each drill path fetches every key held twice, so the copies found must be all the
    # day's copies: if not, a key's copies were split or a store answered inconsistently.
    for side, agg, found in (
        ("source", s_agg, diff.source_copies),
        ("reader", r_agg, diff.reader_copies),
    ):
        want = agg.count - agg.distinct_keys
        if want != found:
            diff.unexplained.append(
                f"day: the {side} holds {want} extra copies of keys; the rows fetched hold {found}"
            )
    return diff


async def _drill_slots(
    sides: Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    cached: DaySlots | None = None,
) -> tuple[list[Node], Fetched]:
    """Localise drift by short time slots, then fetch only the differing slots' rows.

    One slot query per side finds every differing slot of the day, however the drift is
    spread; the rows of all small differing slots come back in one ranged fetch, which a
    time index serves without hashing the rest of the day. A slot still too big (rows
    that share a timestamp) is split by key-hash prefix. Slots the first pass already
    returned are used as they are; only a side without them is asked.
    """
    check = sides.check
    dd = check.drilldown
    if cached is not None and cached.usable(start):
        seconds = FIRST_PASS_SLOT

        async def slots_of(side: Counted, have: list[BucketDigest] | None) -> list[BucketDigest]:
            return have if have is not None else await side.slots(start, end, seconds)

        s_sl, r_sl = await all_or_none(
            slots_of(sides.source, cached.source), slots_of(sides.reader, cached.reader)
        )
    else:
        seconds = plan.slot_seconds(max(s_agg.count, r_agg.count))
        s_sl, r_sl = await sides.both(lambda s: s.slots(start, end, seconds))
    s_by = {utc(b.start): b.agg for b in s_sl}
    r_by = {utc(b.start): b.agg for b in r_sl}
    slots = [
        (k, s_by.get(k, Aggregate()), r_by.get(k, Aggregate()))
        for k in sorted(s_by.keys() | r_by.keys())
    ]
    bad = [sl for sl in slots if needs_drill(sl[1], sl[2])]
    small = [sl for sl in bad if plan.fits_leaf(sl[1], sl[2], dd)]
    big = [sl for sl in bad if not plan.fits_leaf(sl[1], sl[2], dd)]
    step = timedelta(seconds=seconds)
    fetched = Fetched()
    day = utc(start)

    def hour_of(k: datetime) -> datetime:
        return day + (k - day) // buckets.HOUR * buckets.HOUR

    found_in: dict[datetime, Delta] = {}
    if small:
        ranges = plan.merge_ranges([(k, k + step) for k, _, _ in small])
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, None, ranges))
        fetched.add(Fetched(s_rows, r_rows))
        for h, d in deltas(s_rows, r_rows, lambda r: hour_of(utc(r.event_time))).items():
            if isinstance(h, datetime):
                found_in[h] = d
    hours = hours_from_slots(check, day, slots)
    by_start = {utc(datetime.fromisoformat(h.label)): h for h in hours}
    for k, s_a, r_a in big:
        nodes, below = await _drill_range(sides, k, k + step, s_a, r_a, 0, None, 1.0)
        fetched.add(below)
        by_start[hour_of(k)].children.extend(nodes)
        found_in.setdefault(hour_of(k), Delta()).add(below.delta())
    for h_start, h in by_start.items():
        fetched.check(f"hour {h.label}", h.source, h.reader, found_in.get(h_start, Delta()))
    fetched_hours = {hour_of(k) for k, _, _ in small}
    big_hours = {hour_of(k) for k, _, _ in big}
    for h_start, h in by_start.items():
        h.fetched = h_start in fetched_hours and h_start not in big_hours
    return hours, fetched


async def _drill_range(
    sides: Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    depth: int,
    within: Sequence[str] | None,
    est_diffs: float,
) -> tuple[list[Node], Fetched]:
    """Split [start, end) by key-hash prefix until leaves are small, then fetch their rows."""
    check = sides.check
    dd = check.drilldown
    where = f"[{buckets.label(start, check.timezone)}, {buckets.label(end, check.timezone)})"
    if within:
        where = f"prefix {','.join(within)} of {where}"
    if plan.fits_leaf(s_agg, r_agg, dd) or depth >= dd.max_depth:
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, within))
        leaf = Fetched(s_rows, r_rows)
        leaf.check(where, s_agg, r_agg, leaf.delta())
        return [], leaf
    rows = max(s_agg.count, r_agg.count)
    new_depth = depth + plan.prefix_step(rows, est_diffs, dd, depth)
    s_pre, r_pre = await sides.both(lambda s: s.prefixes(start, end, new_depth, within))
    nodes = prefix_nodes(s_pre, r_pre)
    bad = [n for n in nodes if n.differs]
    small = [n for n in bad if plan.fits_leaf(n.source, n.reader, dd) or new_depth >= dd.max_depth]
    big = [n for n in bad if n not in small]
    fetched = Fetched()
    if small:
        # Every small differing prefix of this range in one round trip per side.
        labels = [n.label for n in small]
        s_rows, r_rows = await sides.both(lambda s: s.rows_of(start, end, labels))
        fetched.add(Fetched(s_rows, r_rows))
        by_prefix = deltas(s_rows, r_rows, lambda r: r.key_hash[:new_depth])
        for n in small:
            n.fetched = True
            fetched.check(
                f"prefix {n.label} of {where}", n.source, n.reader, by_prefix.get(n.label, Delta())
            )
    for n in big:
        n.children, below = await _drill_range(
            sides, start, end, n.source, n.reader, new_depth, [n.label], 1.0
        )
        fetched.add(below)
    # The prefixes split the range: what they fetched must be what the range differs by.
    if not fetched.unexplained:
        fetched.check(where, s_agg, r_agg, fetched.delta())
    # Only the differing prefixes are worth keeping in the stored tree.
    return bad, fetched
