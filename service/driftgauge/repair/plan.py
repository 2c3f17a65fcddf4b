"""Plan a backfill from stored reconciliation results: drifting hours, first bad, consumers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from driftgauge.repair.partitions import HOUR, Partition

# The latest completed run that judged each day, as the API serves it.
_LATEST_DAYS = (
    "SELECT DISTINCT ON (b.day) b.run_id, b.day, b.start_at, b.status, b.drift_hours"
    " FROM buckets b"
    " JOIN runs r ON r.id = b.run_id WHERE r.check_name = $1 AND r.complete"
    " AND b.day BETWEEN $2 AND $3 ORDER BY b.day, r.finished_at DESC, r.id DESC"
)


@dataclass
class Target:
    """One partition to recompute, and the stored run that found it drifting."""

    start: datetime
    end: datetime
    run_id: int
    whole_day: bool = False
    """True when the run stored no hour for the day: every hour of it is a target."""


@dataclass(frozen=True)
class Reader:
    """A consumer that read a partition to recompute: it is replayed at its rank."""

    name: str
    rank: int
    signs: bool


@dataclass
class Plan:
    """The targets in time order, the first bad partition, the reset point and the readers."""

    targets: list[Target]
    consumers: list[Reader] = field(default_factory=list)

    @property
    def first_bad(self) -> datetime:
        """Return the start of the first bad partition."""
        return self.targets[0].start

    @property
    def reset_to(self) -> datetime:
        """Return the watermark reset point: the hour before the first bad partition."""
        return self.first_bad - HOUR


def day_hours(start: datetime, tz: ZoneInfo) -> list[Partition]:
    """Return the hour partitions of the local day that starts at `start` (UTC instant)."""
    local = start.astimezone(tz).date() + timedelta(days=1)
    end = datetime(local.year, local.month, local.day, tzinfo=tz)
    out = []
    at = start
    while at < end:
        out.append((at, min(at + HOUR, end)))
        at += HOUR
    return out


async def drifting_targets(
    conn: Any, check: str, since: date, until: date, tz: ZoneInfo
) -> list[Target]:
    """Return the drifting hours of [since, until] from the latest run that judged each day."""
    targets: list[Target] = []
    for day in await conn.fetch(_LATEST_DAYS, check, since, until):
        if day["status"] != "drift":
            continue
        hours = await conn.fetch(
            "SELECT hour_start, source_count, source_distinct, source_digest, reader_count,"
            " reader_distinct, reader_digest FROM nodes WHERE run_id = $1 AND day = $2"
            " AND level = 'hour' AND hour_start IS NOT NULL ORDER BY hour_start",
            day["run_id"],
            day["day"],
        )
        if not hours and day["drift_hours"]:
            # Judged from its difference digests: the differing rows' hours, exactly.
            targets += [Target(h, h + HOUR, day["run_id"]) for h in day["drift_hours"]]
            continue
        if not hours:
            targets += [
                Target(lo, hi, day["run_id"], whole_day=True)
                for lo, hi in day_hours(day["start_at"], tz)
            ]
            continue
        for h in hours:
            source = (h["source_count"], h["source_distinct"], h["source_digest"])
            reader = (h["reader_count"], h["reader_distinct"], h["reader_digest"])
            if source != reader:
                targets.append(Target(h["hour_start"], h["hour_start"] + HOUR, day["run_id"]))
    return sorted(targets, key=lambda t: t.start)


async def readers_of(conn: Any, check: str, parts: list[Partition]) -> list[Reader]:
    """Return the consumers that read any of `parts`, in rank order."""
    recs = await conn.fetch(
        "SELECT c.name, c.rank, c.signs FROM consumer_reads r"
        " JOIN consumers c ON c.name = r.consumer"
        " JOIN unnest($2::timestamptz[], $3::timestamptz[]) AS t(lo, hi)"
        "   ON r.partition_start < t.hi AND r.partition_end > t.lo"
        " WHERE r.check_name = $1 GROUP BY c.name ORDER BY c.rank, c.name",
        check,
        [lo for lo, _ in parts],
        [hi for _, hi in parts],
    )
    return [Reader(r["name"], r["rank"], r["signs"]) for r in recs]
