"""Hour partitions of a check's reader view: live snapshots, comparisons and totals."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NotRequired, TypedDict

from driftgauge.core.aggregate import Aggregate
from driftgauge.stores.base import StoreAdapter

HOUR = timedelta(hours=1)
Partition = tuple[datetime, datetime]
Snapshot = dict[str, Any]
"""{"count", "distinct_keys", "digest" (decimal text: it is unsigned 64-bit), "measures",
"row_hash" (absent: md5)}."""


class Totals(TypedDict):
    """The row count and each measure's exact total (decimal text) over some partitions."""

    partitions: int
    count: int
    measures: NotRequired[dict[str, str]]


class Change(TypedDict):
    """After minus before: the row count and each measure's total (decimal text)."""

    count: int
    measures: NotRequired[dict[str, str]]


def snapshot(agg: Aggregate, row_hash: str = "md5") -> Snapshot:
    """Return a partition's aggregate as stored JSON; measures and a non-md5 hash when present."""
    out: Snapshot = {
        "count": agg.count,
        "distinct_keys": agg.distinct_keys,
        "digest": str(agg.digest),
    }
    if row_hash != "md5":
        out["row_hash"] = row_hash
    measures: Mapping[str, Any] | None = getattr(agg, "measures", None)
    if measures:
        out["measures"] = {name: str(value) for name, value in sorted(measures.items())}
    return out


EMPTY = snapshot(Aggregate())


def same(a: Snapshot | None, b: Snapshot | None) -> bool:
    """Return True when two snapshots hold the same rows by count, keys, content and totals.

    Digests of two row hashes (a snapshot stored before the check's hash changed) are not
    comparable: such snapshots are compared by count, distinct keys and totals only.
    """
    if a is None or b is None:
        return False
    keys: tuple[str, ...] = ("count", "distinct_keys", "digest")
    if a.get("row_hash", "md5") != b.get("row_hash", "md5"):
        keys = ("count", "distinct_keys")
    if any(a.get(k) != b.get(k) for k in keys):
        return False
    return bool(a.get("measures", {}) == b.get("measures", {}))


def runs(parts: Iterable[Partition]) -> list[Partition]:
    """Merge partitions into contiguous [start, end) ranges, in time order."""
    out: list[Partition] = []
    for lo, hi in sorted(parts):
        if out and out[-1][1] >= lo:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


async def capture(adapter: StoreAdapter, parts: Sequence[Partition]) -> dict[datetime, Snapshot]:
    """Return each partition's snapshot as the store holds it now (empty when it has no row)."""
    found: dict[datetime, Aggregate] = {}
    # The adapter's view carries the check's row hash (fakes without a view hash with md5).
    row_hash = getattr(getattr(adapter, "view", None), "row_hash", "md5")
    for lo, hi in runs(parts):
        for bucket in await adapter.bucket_digests(lo, hi, "hour"):
            found[bucket.start] = bucket.agg
    empty = snapshot(Aggregate(), row_hash)
    return {
        start: snapshot(found[start], row_hash) if start in found else dict(empty)
        for start, _ in parts
    }


def totals(snaps: Iterable[Snapshot]) -> Totals:
    """Return the row count and every measure's exact total over some partitions."""
    count = 0
    sums: dict[str, Decimal] = {}
    n = 0
    for snap in snaps:
        n += 1
        count += int(snap["count"])
        for name, value in snap.get("measures", {}).items():
            sums[name] = sums.get(name, Decimal(0)) + Decimal(value)
    out: Totals = {"partitions": n, "count": count}
    if sums:
        out["measures"] = {name: str(total) for name, total in sorted(sums.items())}
    return out


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> Change:
    """Return after minus before for the count and each measure total."""
    out: Change = {"count": int(after["count"]) - int(before["count"])}
    names = set(before.get("measures", {})) | set(after.get("measures", {}))
    if names:
        out["measures"] = {
            name: str(
                Decimal(after.get("measures", {}).get(name, "0"))
                - Decimal(before.get("measures", {}).get(name, "0"))
            )
            for name in sorted(names)
        }
    return out


def describe(snap: Mapping[str, Any]) -> str:
    """Return a snapshot as a short line for people: count, then totals."""
    text = f"count {snap['count']}"
    for name, value in snap.get("measures", {}).items():
        text += f", {name} {value}"
    return text
