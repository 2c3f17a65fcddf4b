"""What every SQL adapter does around its queries: their arguments in, their rows out (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from driftgauge.config.frozen import View
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.clock import MICROSECOND
from driftgauge.encoding.digest import exported_key, unsigned64
from driftgauge.stores.base import BucketDigest, LazySlots, RowHash, no_prefixes
from driftgauge.stores.sql.dialect import SqlDialect

Row = Mapping[str, Any]
ExportedRow = tuple[Any, Any, Any, datetime]
"""One row of the export query as a kind streams it: key text, key hash, row hash, UTC time."""


def buckets(
    rows: Sequence[Row], reasons: Sequence[str], measures: Sequence[str] = ()
) -> list[BucketDigest]:
    """Return the digests of a bucket or slot query's rows (bucket, rule, n, keys, digest).

    A row with no rule is a bucket's expected aggregate; a row with rule i counts the rows
    exclusion `reasons[i - 1]` dropped there. With `measures`, columns m0, m1, ... hold
    their totals (a NULL sum, all values NULL, is 0).
    """
    # Keyed by the UTC instant: local datetimes of one zone that differ only in fold
    # (the two 02:00 of a day that falls back) are equal dict keys.
    out: dict[datetime, tuple[Aggregate, dict[str, int]]] = {}
    for r in rows:
        begin = r["bucket"].astimezone(UTC)
        agg, excluded = out.get(begin, (Aggregate(), {}))
        if r["rule"] is None:
            agg = Aggregate(
                count=r["n"],
                distinct_keys=r["keys"],
                digest=unsigned64(int(r["digest"] or 0)),
                measures=totals(r, measures),
            )
        else:
            reason = reasons[r["rule"] - 1]
            excluded = excluded | {reason: excluded.get(reason, 0) + r["n"]}
        out[begin] = (agg, excluded)
    return [BucketDigest(start=b, agg=a, excluded=x) for b, (a, x) in sorted(out.items())]


def slots(rows: Sequence[Row]) -> LazySlots:
    """Return the slots of a one-scan day and slot query's rows, per day, built when looked up."""
    by_day: dict[datetime, list[Row]] = {}
    for r in rows:
        if r["slot"] is not None:
            by_day.setdefault(r["bucket"], []).append(r)
    return LazySlots({d.astimezone(UTC): rs for d, rs in by_day.items()}, _slots)


def _slots(rows: list[Row]) -> list[BucketDigest]:
    return sorted(
        (
            BucketDigest(
                start=r["slot"].astimezone(UTC),
                agg=Aggregate(
                    count=r["n"], distinct_keys=r["keys"], digest=unsigned64(int(r["digest"]))
                ),
            )
            for r in rows
        ),
        key=lambda b: b.start,
    )


def numbered_slots(rows: Sequence[Row], origin: datetime, step: timedelta) -> list[BucketDigest]:
    """Return the slots of rows that number each slot (`slot`) in steps from `origin`."""
    return sorted(
        (
            BucketDigest(
                start=origin + step * int(r["slot"]),
                agg=Aggregate(
                    count=int(r["n"]),
                    distinct_keys=int(r["keys"]),
                    digest=unsigned64(int(r["digest"] or 0)),
                ),
            )
            for r in rows
        ),
        key=lambda b: b.start,
    )


def totals(r: Row, measures: Sequence[str]) -> dict[str, Decimal] | None:
    """Return a row's measure totals from its m0, m1, ... columns; None without measures."""
    if not measures:
        return None
    return {
        name: Decimal(0) if r[f"m{i}"] is None else Decimal(r[f"m{i}"])
        for i, name in enumerate(measures)
    }


def prefix_query(
    dialect: SqlDialect,
    view: View,
    start: datetime,
    end: datetime,
    depth: int,
    within: Sequence[str] | None,
) -> tuple[str, list[Any]] | None:
    """Return the prefix query and its arguments; None when the answer is empty anyway."""
    if no_prefixes(start, end, depth, within):
        return None
    args: list[Any] = [start, end, depth]
    if within is not None:
        args.append(dialect.like_patterns(list(within)))
    return dialect.prefix_sql(view, within=within is not None), args


def prefixes(rows: Sequence[Row]) -> dict[str, Aggregate]:
    """Return prefix → aggregate from a prefix query's rows."""
    return {
        r["prefix"]: Aggregate(
            count=r["n"], distinct_keys=r["keys"], digest=unsigned64(int(r["digest"]))
        )
        for r in rows
    }


def rows_query(
    dialect: SqlDialect,
    view: View,
    start: datetime,
    end: datetime,
    prefixes: Sequence[str] | None,
    spans: Sequence[tuple[datetime, datetime]] | None,
) -> tuple[str, list[Any]]:
    """Return the row export query and its arguments (see ReadAdapter.iter_rows)."""
    args: list[Any] = [start, end]
    if prefixes is not None:
        args.append(dialect.like_patterns(list(prefixes)))
    at = instants(spans) if spans is not None and dialect.points_sql("t", 1) else None
    if at is not None:
        args.append(at)
        return dialect.rows_sql(view, within=prefixes is not None, points=True), args
    if spans is not None:
        args += [[lo for lo, _ in spans], [hi for _, hi in spans]]
    return dialect.rows_sql(
        view, within=prefixes is not None, ranges=None if spans is None else len(spans)
    ), args


POINTS_PER_SPAN = 16
"""A span at most this many microseconds long is asked as its instants."""


def instants(spans: Sequence[tuple[datetime, datetime]]) -> list[datetime] | None:
    """Return every instant of spans a few microseconds long (a peel's); None otherwise.

    Event times are whole microseconds, so [t, t + 1 us) holds exactly the rows at t.
    """
    out: list[datetime] = []
    for lo, hi in spans:
        if hi - lo > POINTS_PER_SPAN * MICROSECOND:
            return None
        t = lo
        while t < hi:
            out.append(t)
            t += MICROSECOND
    return out


def exported_row(row: ExportedRow, composite: bool) -> RowHash:
    """Return one row of the export query as the expected row it stands for."""
    ktext, khash, rhash, t = row
    return RowHash(
        key=exported_key(ktext, composite),
        key_hash=str(khash),
        row_hash=unsigned64(int(rhash)),
        event_time=t,
    )
