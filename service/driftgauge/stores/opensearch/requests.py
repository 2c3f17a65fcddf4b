"""OpenSearch request bodies and response parsing for the digest scripts (no I/O)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib import resources
from typing import Any

from driftgauge.config.frozen import View
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.clock import EPOCH
from driftgauge.encoding import iblt
from driftgauge.encoding.digest import STEP_MICROS
from driftgauge.stores.base import BucketDigest, Granularity

SCRIPT_FILE = "digest.painless"
_SECTION = "// @section "
_HASHING = (
    "bucket_map",
    "dayslot_map",
    "daycell_map",
    "prefix_map",
    "row_fields",
    "prefix_filter",
    "bucket_combine",
    "bucket_reduce",
    "dayslot_combine",
    "dayslot_reduce",
    "daycell_combine",
)
"""The sections the shared functions are prepended to (the totals' helpers too)."""
TIME_FORMAT = "strict_date_optional_time_nanos"
MAX_BUCKETS_PER_REQUEST = 1000
"""Stay far below search.max_buckets (65,535) whatever the chunking decides."""


class ResponseError(ValueError):
    """A response did not have the shape the request asked for."""


@functools.cache
def scripts() -> dict[str, str]:
    """Return each Painless script body by section, with the shared functions prepended."""
    text = resources.files("driftgauge.stores").joinpath(SCRIPT_FILE).read_text("utf-8")
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_SECTION):
            current = sections.setdefault(line[len(_SECTION) :].strip(), [])
        elif current is not None:
            current.append(line)
    bodies = {name: "\n".join(lines).strip() + "\n" for name, lines in sections.items()}
    functions = bodies.pop("functions")
    return {name: (functions + body if name in _HASHING else body) for name, body in bodies.items()}


def script(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Return an inline Painless script object for one section with its params."""
    return {"lang": "painless", "source": scripts()[name], "params": dict(params)}


def script_params(view: View) -> dict[str, Any]:
    """Return the params every digest script reads: key, fields, types, time field, ts step.

    No value may be null: scripted_metric deep-copies params and fails on a null. An
    absent `within` reads as null in Painless and means "no prefix restriction".
    """
    return {
        "key_field": view.key_column,
        "key_type": view.key_type,
        "key_fields": list(view.key_columns) if view.composite else [],
        "key_types": list(view.key_types) if view.composite else [],
        "fields": list(view.columns),
        "types": [f.type for f in view.fields],
        "time_field": view.time_column,
        "within_lengths": [],
        "depth": 0,
        "encoding": False,
        "ts_step": STEP_MICROS[view.timestamp_precision],
        "measures": list(view.measure_columns),
        "measure_scale": view.measure_scale or 0,
        "lookup3": view.row_hash == "lookup3",
    }


def iso(moment: datetime) -> str:
    """Return an aware datetime as UTC ISO 8601 with microseconds."""
    if moment.tzinfo is None:
        raise ValueError("window bounds must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reader_filter(view: View) -> dict[str, Any] | None:
    """Return the reader's query DSL, unwrapped from a {"query": …} body if given so."""
    flt = view.filter
    if flt is not None and set(flt) == {"query"}:
        inner = flt["query"]
        return inner if isinstance(inner, dict) else None
    return flt


def window_query(
    view: View,
    start: datetime,
    end: datetime,
    *,
    expected_only: bool,
    extra: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Return the view's rows in [start, end): reader filter AND time range (AND not excluded)."""
    filters: list[dict[str, Any]] = [_time_range(view, start, end)]
    flt = reader_filter(view)
    if flt:
        filters.append(flt)
    filters.extend(extra)
    query: dict[str, Any] = {"filter": filters}
    if expected_only and view.exclusions:
        query["must_not"] = _exclusion_queries(view)
    return {"bool": query}


def _exclusion_queries(view: View) -> list[dict[str, Any]]:
    return [ex.query for ex in view.exclusions if ex.query is not None]


def _histogram(view: View, granularity: Granularity) -> dict[str, Any]:
    return {
        "field": view.time_column,
        "calendar_interval": granularity,
        "time_zone": view.timezone.key,
        "min_doc_count": 1,
    }


def day_counts_body(view: View, start: datetime, end: datetime) -> dict[str, Any]:
    """Return a request for doc counts per day, used to cut a window into bounded chunks."""
    return {
        "size": 0,
        "track_total_hits": True,
        "query": window_query(view, start, end, expected_only=False),
        "aggs": {"b": {"date_histogram": _histogram(view, "day")}},
    }


def bucket_body(
    view: View, start: datetime, end: datetime, granularity: Granularity
) -> dict[str, Any]:
    """Return a request for (count, distinct keys, digest) and exclusions per bucket."""
    return _digest_body(view, start, end, _histogram(view, granularity))


def slot_body(
    view: View, start: datetime, end: datetime, seconds: int, origin: datetime
) -> dict[str, Any]:
    """Return a request for bucket_body's aggregates per slot of `seconds` from `origin`.

    Fixed intervals in UTC with an offset, not in the view's time zone: slots are spans
    of absolute time, so they keep their length and alignment across a DST change.
    """
    interval_ms = seconds * 1000
    offset_ms = _epoch_ms(origin) % interval_ms
    histogram = {
        "field": view.time_column,
        "fixed_interval": f"{seconds}s",
        "offset": f"{offset_ms}ms",
        "min_doc_count": 1,
    }
    return _digest_body(view, start, end, histogram)


def day_slot_body(
    view: View, start: datetime, end: datetime, seconds: int, origin: datetime
) -> dict[str, Any]:
    """Return bucket_body's day request whose metric also sums each slot of `seconds`.

    Slots are numbered from `origin` (slot i starts at origin + i * seconds); the row
    hash is computed once and added to both the day and its slot.
    """
    return _digest_body(
        view,
        start,
        end,
        _histogram(view, "day"),
        scripts_of="dayslot",
        extra={"origin_ms": _epoch_ms(origin), "slot_ms": seconds * 1000},
    )


def day_cell_body(view: View, start: datetime, end: datetime, width: int) -> dict[str, Any]:
    """Return bucket_body's day request whose metric also builds each day's cells.

    The cells of `width` per sub-table are summed as encoding.iblt.build sums them; the
    row hash is computed once for the day and its cells.
    """
    params = {
        "width": width,
        "k": iblt.K,
        "position_bits": iblt.POSITION_BITS,
        "c1": iblt.C1,
        "c2": iblt.C2,
        "c3": iblt.C3,
        "c4": iblt.C4,
    }
    day = _histogram(view, "day")
    return _digest_body(
        view, start, end, day, scripts_of="daycell", reduce_of="dayslot", extra=params
    )


def cells_from(raw: Mapping[str, Any]) -> dict[int, iblt.Cell]:
    """Return one day's cells from its raw map of cell index → [count, three sums]."""
    out = {}
    for i, value in raw.items():
        count, rows, checks, times = value
        out[int(i)] = (int(count), int(rows), int(checks), int(times))
    return out


def _epoch_ms(moment: datetime) -> int:
    delta = moment - EPOCH
    return delta // timedelta(milliseconds=1)


def _digest_body(
    view: View,
    start: datetime,
    end: datetime,
    histogram: dict[str, Any],
    *,
    scripts_of: str = "bucket",
    reduce_of: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    metric = {
        "scripted_metric": {
            "init_script": script(f"{scripts_of}_init", {}),
            "map_script": script(f"{scripts_of}_map", script_params(view) | dict(extra or {})),
            "combine_script": script(f"{scripts_of}_combine", {}),
            "reduce_script": script(f"{reduce_of or scripts_of}_reduce", {}),
        }
    }
    sub: dict[str, Any]
    excl = _exclusion_queries(view)
    if excl:
        # First matching rule wins, as on the PostgreSQL side: rule i excludes the rows it
        # matches that no earlier rule matched.
        named = {
            str(i): {"bool": {"filter": [q], "must_not": excl[:i]}} for i, q in enumerate(excl)
        }
        sub = {
            "e": {"filter": {"bool": {"must_not": excl}}, "aggs": {"d": metric}},
            "x": {"filters": {"filters": named}},
        }
    else:
        sub = {"d": metric}
    return {
        "size": 0,
        "query": window_query(view, start, end, expected_only=False),
        "aggs": {"b": {"date_histogram": histogram, "aggs": sub}},
    }


def prefix_body(
    view: View, start: datetime, end: datetime, depth: int, within: Sequence[str] | None
) -> dict[str, Any]:
    """Return a request for aggregates grouped by key-hash prefix of `depth` hex digits."""
    params = script_params(view) | {"depth": depth} | _within(within)
    return {
        "size": 0,
        "query": window_query(view, start, end, expected_only=True),
        "aggs": {
            "p": {
                "scripted_metric": {
                    "init_script": script("prefix_init", {}),
                    "map_script": script("prefix_map", params),
                    "combine_script": script("prefix_combine", {}),
                    "reduce_script": script("prefix_reduce", {}),
                }
            }
        },
    }


def rows_body(
    view: View,
    start: datetime,
    end: datetime,
    prefixes: Sequence[str] | None,
    *,
    size: int,
    encoding: bool = False,
    ranges: Sequence[tuple[datetime, datetime]] | None = None,
) -> dict[str, Any]:
    """Return a page request for row hashes sorted by key (PIT and search_after added later).

    With `ranges`, only rows whose event time is in one of those sub-ranges match.
    """
    extra: list[dict[str, Any]] = []
    if prefixes is not None:
        extra.append(
            {"script": {"script": script("prefix_filter", script_params(view) | _within(prefixes))}}
        )
    if ranges is not None:
        extra.append(
            {
                "bool": {
                    "should": [_time_range(view, lo, hi) for lo, hi in ranges],
                    "minimum_should_match": 1,
                }
            }
        )
    return {
        "size": size,
        "_source": False,
        "query": window_query(view, start, end, expected_only=True, extra=extra),
        "sort": [{col: {"order": "asc", "missing": "_last"}} for col in view.key_columns],
        "script_fields": {
            "r": {"script": script("row_fields", script_params(view) | {"encoding": encoding})}
        },
    }


def _time_range(view: View, start: datetime, end: datetime) -> dict[str, Any]:
    return {"range": {view.time_column: {"gte": iso(start), "lt": iso(end), "format": TIME_FORMAT}}}


def _within(prefixes: Sequence[str] | None) -> dict[str, Any]:
    if prefixes is None:
        return {}
    return {"within": sorted(set(prefixes)), "within_lengths": sorted({len(p) for p in prefixes})}


@dataclass(frozen=True)
class DayCounts:
    """A window and the doc count of each of its days, to cut it into chunks of bounded size."""

    start: datetime
    end: datetime
    counts: Sequence[tuple[int, int]]
    """(day start in epoch ms, doc count) for each day holding a document, in order."""


@dataclass(frozen=True)
class Chunk:
    """One request's share of a window, cut at day starts in the view's time zone."""

    start: datetime
    end: datetime


def plan_chunks(days: DayCounts, max_rows: int, max_days: int) -> list[Chunk]:
    """Return chunks of whole days, each with at most max_rows rows (or one day) and max_days."""
    cuts: list[datetime] = []
    rows = 0
    n_days = 0
    for key_ms, count in days.counts:
        if n_days and (rows + count > max_rows or n_days >= max_days):
            cuts.append(datetime.fromtimestamp(key_ms / 1000, tz=UTC))
            rows = n_days = 0
        rows += count
        n_days += 1
    bounds = [days.start, *[c for c in cuts if days.start < c < days.end], days.end]
    return [Chunk(a, b) for a, b in itertools.pairwise(bounds)]


def plan_slot_chunks(days: DayCounts, max_rows: int, seconds: int) -> list[Chunk]:
    """Return plan_chunks' chunks cut on slot bounds, each of at most MAX_BUCKETS_PER_REQUEST.

    Slots are `seconds` long from the window's start; a cut inside a slot would split its
    digest over two requests, so day cuts move back to the start of their slot.
    """
    # Arithmetic on aware datetimes of one zone is wall-clock arithmetic; slots are not.
    origin = days.start.astimezone(UTC)
    step = timedelta(seconds=seconds)
    per_day = -(-25 * 3600 // seconds)  # a day that falls back has 25 hours
    max_days = max(1, MAX_BUCKETS_PER_REQUEST // per_day)
    span = step * MAX_BUCKETS_PER_REQUEST
    bounds = [origin]
    for chunk in plan_chunks(days, max_rows, max_days):
        cut = origin + (chunk.end - origin) // step * step if chunk.end < days.end else days.end
        while cut - bounds[-1] > span:
            bounds.append(bounds[-1] + span)
        if cut > bounds[-1]:
            bounds.append(cut)
    return [Chunk(a, b) for a, b in itertools.pairwise(bounds)]


def parse_day_counts(resp: Mapping[str, Any]) -> list[tuple[int, int]]:
    """Return (day start in epoch ms, doc count) pairs from a day_counts response."""
    try:
        return [(int(b["key"]), int(b["doc_count"])) for b in resp["aggregations"]["b"]["buckets"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ResponseError(f"day counts: {exc!r}") from exc


def parse_buckets(resp: Mapping[str, Any], view: View) -> list[BucketDigest]:
    """Return BucketDigests from a bucket_body response."""
    out: list[BucketDigest] = []
    reasons = [ex.reason for ex in view.exclusions if ex.query is not None]
    try:
        for b in resp["aggregations"]["b"]["buckets"]:
            # The UTC instant: a local datetime loses which of two repeated hours it was.
            start = datetime.fromtimestamp(int(b["key"]) / 1000, tz=UTC)
            excluded: dict[str, int] = {}
            if reasons:
                agg = _metric(b["e"]["d"]["value"], view)
                for i, reason in enumerate(reasons):
                    n = int(b["x"]["buckets"][str(i)]["doc_count"])
                    if n:
                        excluded[reason] = excluded.get(reason, 0) + n
            else:
                agg = _metric(b["d"]["value"], view)
            out.append(BucketDigest(start=start, agg=agg, excluded=excluded))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ResponseError(f"bucket digests: {exc!r}") from exc
    return out


def parse_day_slots(
    resp: Mapping[str, Any], view: View
) -> tuple[list[BucketDigest], dict[datetime, Mapping[str, Any]]]:
    """Return the days of a day_slot_body response and, per day, its raw slot map."""
    days = parse_buckets(resp, view)
    has_rules = any(ex.query is not None for ex in view.exclusions)
    raw: dict[datetime, Mapping[str, Any]] = {}
    try:
        for day, b in zip(days, resp["aggregations"]["b"]["buckets"], strict=True):
            slots = (b["e"]["d"] if has_rules else b["d"])["value"][3]
            if not isinstance(slots, Mapping):
                raise ResponseError(f"slots of {day.start.isoformat()} are not a map")
            if slots:
                raw[day.start] = slots
    except (KeyError, TypeError, IndexError) as exc:
        raise ResponseError(f"day and slot digests: {exc!r}") from exc
    return days, raw


def slots_from(raw: Mapping[str, Any], origin: datetime, seconds: int) -> list[BucketDigest]:
    """Return one day's slots from its raw map of slot number → [count, digest].

    Keys are not counted per slot: the count stands for them, as slot_digests with
    distinct=False (slots are only compared on days where no key repeats).
    """
    base, step = origin.astimezone(UTC), timedelta(seconds=seconds)
    out = []
    for i, value in raw.items():
        count, digest = value
        out.append(
            BucketDigest(base + step * int(i), Aggregate(int(count), int(count), int(digest)))
        )
    return sorted(out, key=lambda b: b.start)


def parse_prefixes(resp: Mapping[str, Any]) -> dict[str, Aggregate]:
    """Return prefix → Aggregate from a prefix_body response."""
    try:
        value = resp["aggregations"]["p"]["value"]
        return {str(p): _metric(v) for p, v in sorted(value.items())}
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ResponseError(f"prefix digests: {exc!r}") from exc


def _metric(value: Sequence[Any], view: View | None = None) -> Aggregate:
    count, digest, distinct = value[:3]
    return Aggregate(
        count=int(count),
        distinct_keys=int(distinct),
        digest=int(digest),
        measures=None if view is None else totals(view, value[-1]),
    )


def totals(view: View, scaled: Sequence[Any]) -> dict[str, Decimal] | None:
    """Return the measure totals from the script's scaled integers (the last value).

    A bucket whose expected rows were all excluded has no totals from any shard: 0.
    """
    if not view.measures:
        return None
    if not isinstance(scaled, list):
        raise ResponseError(f"measure totals are not a list: {scaled!r}")
    scale = view.measure_scale or 0
    out = {}
    for i, name in enumerate(view.measures):
        units = int(scaled[i]) if i < len(scaled) else 0
        out[name] = Decimal(units).scaleb(-scale)
    return out
