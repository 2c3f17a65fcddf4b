"""Drill a differing day down: by slots or key-hash prefixes, to the rows of small leaves."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from driftgauge.core import buckets
from driftgauge.core.aggregate import Aggregate
from driftgauge.engine import explain, plan
from driftgauge.engine.first_pass import DaySlots
from driftgauge.engine.join import Delta, LeafDiff, Partitioned, join_partitioned, partitions_for
from driftgauge.engine.nodes import hours_from_rows, hours_from_slots, pair_hours, prefix_nodes
from driftgauge.engine.payloads import DayStrategy
from driftgauge.engine.result import Node, needs_drill
from driftgauge.engine.sides import FIRST_PASS_SLOT, Counted, Sides, utc
from driftgauge.engine.tasks import all_or_none
from driftgauge.stores.base import BucketDigest, RowHash

Group = Callable[[RowHash], Hashable]


class Fetched:
    """Rows fetched below a day, per side, joined once for the whole day.

    Joining each leaf on its own would miss a key whose rows sit in two leaves (a row
    moved between a fetched slot and a slot split by prefix): the day join sees them meet.
    The rows stream into partitions by key hash (engine.join.Partitioned, spilled to disk
    past a bound), shared by every node below the day: memory does not follow the day's
    size. Each node keeps what its own rows add up to, to check against its aggregates.
    """

    def __init__(self, rows: Partitioned) -> None:
        self.rows = rows
        self.total = Delta()
        """Source minus reader over the rows this node (and the nodes it took) fetched."""
        self.unexplained: list[str] = []
        """Nodes whose fetched rows do not add up to how their aggregates differ."""

    @classmethod
    def of(cls, source: Iterable[RowHash], reader: Iterable[RowHash]) -> Fetched:
        """Return rows already fetched (a few: the rows a peel named), in one partition."""
        out = cls(Partitioned(1))
        for sign, rows in ((1, source), (-1, reader)):
            for r in rows:
                out.rows.add(r, sign)
                out.total.row(r, sign)
        return out

    def below(self) -> Fetched:
        """Return a node of this day: its rows go to the same partitions."""
        return Fetched(self.rows)

    def add(self, other: Fetched) -> None:
        """Take what a node below fetched and its problems (its rows are already here)."""
        self.total.add(other.total)
        self.unexplained.extend(other.unexplained)

    def delta(self) -> Delta:
        """Return source minus reader over every row this node fetched."""
        return Delta(self.total.count, self.total.digest)

    async def fetch(
        self,
        sides: Sides,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None,
        ranges: Sequence[tuple[datetime, datetime]] | None = None,
        group: Group | None = None,
    ) -> dict[Hashable, Delta]:
        """Stream both sides' rows in here; return source minus reader by `group` of a row."""
        by: dict[Hashable, Delta] = {}

        def sink(sign: int) -> Callable[[RowHash], None]:
            def take(r: RowHash) -> None:
                self.rows.add(r, sign)
                self.total.row(r, sign)
                if group is not None:
                    by.setdefault(group(r), Delta()).row(r, sign)

            return take

        await all_or_none(
            sides.source.rows_into(start, end, prefixes, ranges, sink(1)),
            sides.reader.rows_into(start, end, prefixes, ranges, sink(-1)),
        )
        return by

    def check(self, where: str, s_agg: Aggregate, r_agg: Aggregate, got: Delta) -> None:
        """Note `where` when its fetched rows differ otherwise than its aggregates do."""
        problem = explain.mismatch(where, s_agg, r_agg, got)
        if problem:
            self.unexplained.append(problem)


class Taken(NamedTuple):
    """The strategy a day took, and why (see engine.payloads.DayStrategy)."""

    strategy: DayStrategy
    reason: str


async def drill_day(
    sides: Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    ledger_excluded: Mapping[str, str],
    slots: DaySlots | None = None,
) -> tuple[list[Node], LeafDiff, Taken]:
    """Return the day's drill-down tree, the classified differences and how it drilled."""
    check = sides.check
    dd = check.drilldown
    with Partitioned(partitions_for(max(s_agg.count, r_agg.count))) as rows:
        fetched = Fetched(rows)
        if plan.fits_leaf(s_agg, r_agg, dd) or plan.is_dense(s_agg, r_agg, dd):
            # Dense drift or a small day: its rows cost less than walking the levels.
            await fetched.fetch(sides, start, end, None)
            hours = hours_from_rows(check, rows.each())
            if check.measures:
                # Rows carry no measure values: the stores' hour buckets give each hour's totals.
                s_hours, r_hours = await sides.both(lambda s: s.buckets(start, end, "hour"))
                hours = pair_hours(check, s_hours, r_hours)
                for h in hours:
                    h.fetched = True
            why = "small enough to fetch" if plan.fits_leaf(s_agg, r_agg, dd) else "dense drift"
            taken = Taken("rows", f"{why}: the day's keys and row hashes were read and joined")
            return hours, join_day(s_agg, r_agg, fetched, ledger_excluded), taken
        if not (s_agg.has_duplicates or r_agg.has_duplicates):
            tree = await _drill_slots(sides, start, end, s_agg, r_agg, fetched, slots)
            held = slots is not None and slots.usable(start)
            taken = Taken(
                "slots",
                "drilled down by time slots"
                + (" the first pass returned" if held else ", asked for the day"),
            )
            return tree, join_day(s_agg, r_agg, fetched, ledger_excluded), taken
        # A key held twice may sit in two hours or slots; only key-hash prefixes of the
        # whole day keep all its copies together. The hours are asked for the tree only.
        s_hours, r_hours = await sides.both(lambda s: s.buckets(start, end, "hour"))
        hours = pair_hours(check, s_hours, r_hours)
        est = plan.estimate_diffs(sum(h.differs for h in hours), max(len(hours), 1))
        nodes = await _drill_range(sides, start, end, s_agg, r_agg, 0, None, est, fetched)
        taken = Taken("drill", "a key repeats: drilled down by key-hash prefixes of the whole day")
        return hours + nodes, join_day(s_agg, r_agg, fetched, ledger_excluded), taken


def join_day(
    s_agg: Aggregate, r_agg: Aggregate, fetched: Fetched, ledger_excluded: Mapping[str, str]
) -> LeafDiff:
    """Join every row fetched for the day (a partition at a time); check the copies add up."""
    diff = join_partitioned(fetched.rows, ledger_excluded)
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
    fetched: Fetched,
    cached: DaySlots | None = None,
) -> list[Node]:
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
    day = utc(start)

    def hour_of(k: datetime) -> datetime:
        return day + (k - day) // buckets.HOUR * buckets.HOUR

    found_in: dict[datetime, Delta] = {}
    if small:
        ranges = plan.merge_ranges([(k, k + step) for k, _, _ in small])
        by_hour = await fetched.fetch(
            sides, start, end, None, ranges, lambda r: hour_of(utc(r.event_time))
        )
        for h, d in by_hour.items():
            if isinstance(h, datetime):
                found_in[h] = d
    hours = hours_from_slots(check, day, slots)
    by_start = {utc(datetime.fromisoformat(h.label)): h for h in hours}
    for k, s_a, r_a in big:
        below = fetched.below()
        nodes = await _drill_range(sides, k, k + step, s_a, r_a, 0, None, 1.0, below)
        fetched.add(below)
        by_start[hour_of(k)].children.extend(nodes)
        found_in.setdefault(hour_of(k), Delta()).add(below.delta())
    for h_start, h in by_start.items():
        fetched.check(f"hour {h.label}", h.source, h.reader, found_in.get(h_start, Delta()))
    fetched_hours = {hour_of(k) for k, _, _ in small}
    big_hours = {hour_of(k) for k, _, _ in big}
    for h_start, h in by_start.items():
        h.fetched = h_start in fetched_hours and h_start not in big_hours
    return hours


async def _drill_range(
    sides: Sides,
    start: datetime,
    end: datetime,
    s_agg: Aggregate,
    r_agg: Aggregate,
    depth: int,
    within: Sequence[str] | None,
    est_diffs: float,
    fetched: Fetched,
) -> list[Node]:
    """Split [start, end) by key-hash prefix until leaves are small, then fetch their rows.

    The rows go to `fetched` (a node of the day), which also sums what they add up to.
    """
    check = sides.check
    dd = check.drilldown
    where = f"[{buckets.label(start, check.timezone)}, {buckets.label(end, check.timezone)})"
    if within:
        where = f"prefix {','.join(within)} of {where}"
    if plan.fits_leaf(s_agg, r_agg, dd) or depth >= dd.max_depth:
        await fetched.fetch(sides, start, end, within)
        fetched.check(where, s_agg, r_agg, fetched.delta())
        return []
    rows = max(s_agg.count, r_agg.count)
    new_depth = depth + plan.prefix_step(rows, est_diffs, dd, depth)
    s_pre, r_pre = await sides.both(lambda s: s.prefixes(start, end, new_depth, within))
    nodes = prefix_nodes(s_pre, r_pre)
    bad = [n for n in nodes if n.differs]
    small = [n for n in bad if plan.fits_leaf(n.source, n.reader, dd) or new_depth >= dd.max_depth]
    big = [n for n in bad if n not in small]
    if small:
        # Every small differing prefix of this range in one round trip per side.
        labels = [n.label for n in small]
        by_prefix = await fetched.fetch(
            sides, start, end, labels, None, lambda r: r.key_hash[:new_depth]
        )
        for n in small:
            n.fetched = True
            fetched.check(
                f"prefix {n.label} of {where}", n.source, n.reader, by_prefix.get(n.label, Delta())
            )
    for n in big:
        below = fetched.below()
        n.children = await _drill_range(
            sides, start, end, n.source, n.reader, new_depth, [n.label], 1.0, below
        )
        fetched.add(below)
    # The prefixes split the range: what they fetched must be what the range differs by.
    if not fetched.unexplained:
        fetched.check(where, s_agg, r_agg, fetched.delta())
    # Only the differing prefixes are worth keeping in the stored tree.
    return bad
