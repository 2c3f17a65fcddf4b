"""Read and reshape reader filters written in OpenSearch query DSL (pure, no I/O)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any


def sentinel_clause(marker: str) -> dict[str, Any]:
    """Return the clause a reader filter puts under `bool.must_not` to hide canary sentinels."""
    return {"exists": {"field": marker}}


def unwrap(query: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return the query DSL itself when a filter is given as a {"query": …} body."""
    if query is not None and set(query) == {"query"}:
        inner = query["query"]
        return inner if isinstance(inner, dict) else None
    return query


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def excludes_marker(query: dict[str, Any] | None, marker: str) -> bool:
    """Return True when the filter's top-level `bool.must_not` hides documents with `marker`."""
    query = unwrap(query)
    if not isinstance(query, dict) or not isinstance(query.get("bool"), dict):
        return False
    return sentinel_clause(marker) in _as_list(query["bool"].get("must_not"))


def without_marker_clause(query: dict[str, Any], marker: str) -> dict[str, Any]:
    """Return a copy of the filter with the sentinel-hiding clause removed from `must_not`."""
    inner = unwrap(query)
    if not excludes_marker(inner, marker) or inner is None:
        raise ValueError(f"the filter has no bool.must_not clause hiding {marker!r}")
    out = copy.deepcopy(inner)
    bool_q = out["bool"]
    kept = [c for c in _as_list(bool_q.get("must_not")) if c != sentinel_clause(marker)]
    if kept:
        bool_q["must_not"] = kept
    else:
        bool_q.pop("must_not", None)
    return out


def canonical_value(value: Any) -> str:
    """Return a filter or source value as the text both sides are compared by."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _conjunction(parts: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    out: frozenset[str] | None = None
    for part in parts:
        if part is not None:
            out = part if out is None else out & part
    return out


def _disjunction(parts: list[frozenset[str] | None]) -> frozenset[str] | None:
    if not parts or any(p is None for p in parts):
        # One branch that does not constrain the field lets every value through.
        return None
    out: frozenset[str] = frozenset()
    for part in parts:
        if part is not None:
            out |= part
    return out


def _constraint(node: Any, field: str) -> frozenset[str] | None:
    """Return the values of `field` a query node can match, or None when it does not limit them."""
    if not isinstance(node, dict):
        return None
    parts: list[frozenset[str] | None] = []
    for kind, body in node.items():
        if kind == "terms" and isinstance(body, dict) and isinstance(body.get(field), list):
            parts.append(frozenset(canonical_value(v) for v in body[field]))
        elif kind == "term" and isinstance(body, dict) and field in body:
            raw = body[field]
            value = raw.get("value") if isinstance(raw, dict) else raw
            parts.append(frozenset({canonical_value(value)}))
        elif kind == "bool" and isinstance(body, dict):
            required = [
                _constraint(c, field) for key in ("must", "filter") for c in _as_list(body.get(key))
            ]
            should = [_constraint(c, field) for c in _as_list(body.get("should"))]
            # must_not is ignored: it narrows the set, and listing `accepted` covers that case.
            if should and not required:
                required.append(_disjunction(should))
            parts.append(_conjunction(required))
        elif kind == "constant_score" and isinstance(body, dict):
            parts.append(_constraint(body.get("filter"), field))
    return _conjunction(parts)


def accepted_terms(query: dict[str, Any] | None, field: str) -> tuple[str, ...] | None:
    """Return the values of `field` that the filter's term/terms clauses accept, if it has any."""
    found = _constraint(unwrap(query), field)
    return tuple(sorted(found)) if found is not None else None
