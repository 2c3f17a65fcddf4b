"""What an OpenSearch index (alias or pattern: every concrete index) holds for each field.

Digests read doc values, so a field without them (unmapped, `text`, `doc_values: false`)
or with values the index drops (`ignore_above`, `ignore_malformed`) would silently read
as NULL; `index: false` is fine, doc values serve both the reads and the time range.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.preflight import Expects, FieldSchema, Wanted, wanted

Call = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]
"""The adapter's way of making a request: what it does, then a function making the request
(so that it can be retried; errors translated)."""
INTEGERS = frozenset({"long", "integer", "short", "byte"})
KEYWORDS = frozenset({"keyword", "constant_keyword"})
TIMES: dict[str, TimestampPrecision] = {"date": "ms", "date_nanos": "us"}
ACCEPTS: dict[Expects, frozenset[str]] = {
    "string": KEYWORDS,
    "integer": INTEGERS | KEYWORDS,
    "decimal": INTEGERS | KEYWORDS | {"double", "scaled_float"},
    "boolean": frozenset({"boolean"}),
    "timestamp": frozenset(TIMES),
    "time": frozenset(TIMES),
}
WHY = {
    "float": "a 32-bit float widens to a double with made-up digits (1.1 reads as "
    "1.100000023841858); map it as double or keyword",
    "half_float": "a 16-bit float widens to a double with made-up digits; map it as double "
    "or keyword",
    "unsigned_long": "values above 2^63-1 do not fit a 64-bit integer",
}
SHOWN = 3
"""Concrete indexes named in one message; the rest are counted."""


async def describe(view: View, client: Any, call: Call) -> list[FieldSchema]:
    """Return each wanted field as every concrete index behind the view's index maps it."""
    index = str(view.index)
    want = wanted(view)
    columns = sorted({w.column for w in want})
    resp = await call(
        "read the field mappings",
        lambda: client.indices.get_field_mapping(fields=",".join(columns), index=index),
    )
    if not resp:
        return [
            FieldSchema(
                Wanted("index", index, "string"),
                (f"{index} matches no index, so no field can be checked",),
            )
        ]
    leaves = {idx: _leaves(body) for idx, body in resp.items()}
    targets = {
        m["path"]
        for ms in leaves.values()
        for m in ms.values()
        if m.get("type") == "alias" and isinstance(m.get("path"), str)
    }
    if targets:
        more = await call(
            "read the field mappings",
            lambda: client.indices.get_field_mapping(fields=",".join(sorted(targets)), index=index),
        )
        for idx, ms in leaves.items():
            got = _leaves(more.get(idx, {}))
            for col, m in list(ms.items()):
                if m.get("type") == "alias":
                    ms[col] = got.get(str(m.get("path")), {})
    docs = DocCounts(index, len(leaves), client, call)
    return [await _judge_all(w, leaves, docs, client, call) for w in want]


class DocCounts:
    """Documents per concrete index, asked for once and only when a field is unmapped."""

    def __init__(self, index: str, indexes: int, client: Any, call: Call) -> None:
        self._index, self._size = index, max(indexes, 1)
        self._client, self._call = client, call
        self._counts: dict[str, int] | None = None

    async def of(self, idx: str) -> int:
        """Return how many documents concrete index `idx` holds under the view's index."""
        if self._counts is None:
            resp = await self._call(
                "count documents per index",
                lambda: self._client.search(
                    index=self._index,
                    params={"allow_partial_search_results": "false"},
                    body={
                        "size": 0,
                        "aggs": {"i": {"terms": {"field": "_index", "size": self._size}}},
                    },
                ),
            )
            self._counts = {
                str(b["key"]): int(b["doc_count"]) for b in resp["aggregations"]["i"]["buckets"]
            }
        return self._counts.get(idx, 0)


def _leaves(body: Any) -> dict[str, dict[str, Any]]:
    """Return field name → its leaf mapping from one index's get_field_mapping answer."""
    out: dict[str, dict[str, Any]] = {}
    for name, entry in (body.get("mappings") or {}).items():
        mapping = entry.get("mapping") or {}
        if len(mapping) == 1:
            out[name] = dict(next(iter(mapping.values())))
    return out


async def _judge_all(
    w: Wanted,
    leaves: dict[str, dict[str, dict[str, Any]]],
    docs: DocCounts,
    client: Any,
    call: Call,
) -> FieldSchema:
    by_reason: dict[str, list[str]] = {}
    precision: TimestampPrecision | None = None
    holds = ""
    for idx in sorted(leaves):
        mapping = leaves[idx].get(w.column)
        if mapping is None:
            reason = _unmapped(w, await docs.of(idx))
        else:
            reason = await _judge(w, mapping, idx, client, call)
            held = TIMES.get(str(mapping.get("type")))
            if reason is None and held is not None and precision != "ms":
                precision, holds = held, f"{mapping['type']} in index {idx}"
        if reason is not None:
            by_reason.setdefault(reason, []).append(idx)
    problems = tuple(f"{reason} ({_indexes(names)})" for reason, names in by_reason.items())
    return FieldSchema(w, problems, precision=precision, holds=holds)


def _indexes(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    rest = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return f"index {shown}" if len(names) == 1 else f"indexes {shown}{rest}"


def _as_null(w: Wanted) -> str:
    """Return what reading the field as NULL would do to those rows' verdict."""
    if w.role.startswith("key."):
        return "would have a NULL key part (excluded on a source, extra on a reader)"
    if w.is_key:
        return "would all count under one empty key"
    if w.role == "time":
        return "would fall in no window"
    return "would compare as mismatched"


def _unmapped(w: Wanted, docs: int) -> str | None:
    # A fresh index (a rollover) may not have mapped a dynamic field yet: nothing to misread.
    if docs == 0:
        return None
    return (
        f"field {w.column} is not mapped, so all {docs} documents read it as NULL and {_as_null(w)}"
    )


def _measure_problem(w: Wanted, type_: str, m: dict[str, Any]) -> str | None:
    """Return why a measure field's values cannot be summed exactly at the declared scale."""
    scale = w.measure_scale if w.measure_scale is not None else -1
    if type_ == "double":
        return (
            f"field {w.column} is double: a measure needs an exact total, which a double "
            "cannot guarantee (map it as scaled_float, long or keyword)"
        )
    if type_ == "scaled_float":
        factor = m.get("scaling_factor")
        digits = _power_of_ten(factor)
        if digits is None or digits > scale:
            return (
                f"field {w.column} is scaled_float with scaling_factor {factor}: a measure "
                f"at measure_scale {scale} needs a scaling_factor of 10^k with k <= {scale}"
            )
    return None


def _power_of_ten(factor: Any) -> int | None:
    """Return k when `factor` is exactly 10^k (k >= 0), else None."""
    try:
        n = float(factor)
    except (TypeError, ValueError):
        return None
    for k in range(19):
        if n == 10.0**k:
            return k
    return None


async def _judge(w: Wanted, m: dict[str, Any], idx: str, client: Any, call: Call) -> str | None:
    """Return why one index's mapping of the field cannot be read safely, else None."""
    type_ = str(m.get("type", "object"))
    col = w.column
    if type_ in ("text", "match_only_text"):
        subs = [n for n, sub in (m.get("fields") or {}).items() if sub.get("type") == "keyword"]
        hint = f"; use its keyword subfield {col}.{subs[0]}" if subs else ""
        return f"field {col} is {type_}, which has no doc values to read{hint}"
    accepts = ACCEPTS[w.expects]
    if type_ not in accepts:
        what = "the time field" if w.expects == "time" else f"a {w.expects} field"
        why = f" ({WHY[type_]})" if type_ in WHY else ""
        return f"field {col} is {type_}{why}; {what} reads one of {', '.join(sorted(accepts))}"
    if w.measure_scale is not None:
        problem = _measure_problem(w, type_, m)
        if problem is not None:
            return problem
    if m.get("doc_values") is False:
        return f"field {col} is {type_} with doc_values: false, so its values cannot be read"
    if "ignore_above" in m:
        n = m["ignore_above"]
        return (
            f"field {col} is {type_} with ignore_above {n}: values longer than {n} "
            f"characters have no doc value and read as NULL, so those rows {_as_null(w)} "
            "(remove ignore_above or raise it past the longest value)"
        )
    if w.is_key and m.get("normalizer"):
        return (
            f"field {col} has normalizer {m['normalizer']}: keys that differ only in what "
            "it folds would count as one key"
        )
    if m.get("ignore_malformed") is True:
        # Dropped values are listed in _ignored (ignore_above's are not, hence the above).
        hits = await call(
            "count dropped values",
            lambda: client.count(index=idx, body={"query": {"term": {"_ignored": col}}}),
        )
        dropped = int(hits.get("count", 0))
        if dropped:
            return (
                f"field {col} has ignore_malformed and {dropped} documents' values were "
                f"dropped as malformed; they read as NULL and {_as_null(w)}"
            )
    return None
