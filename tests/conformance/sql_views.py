"""What the SQL kinds' fixtures share: a check's view from a Spec, and the golden vectors' views."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import Any

from driftgauge.config.frozen import Exclusion, View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from tests.conformance.spec import Rule, Spec
from tests.integration.conftest import make_view

Quote = Callable[[Any], str]


def sql_quote(value: Any) -> str:
    """Return a standard SQL string literal (quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def where_sql(rule: Rule, quote: Quote = sql_quote) -> str:
    """Return the predicate keeping (or excluding) the rows `rule` names."""
    if rule.op == "null":
        return f"{rule.column} IS NULL"
    return f"{rule.column} {'=' if rule.op == 'eq' else '<>'} {quote(rule.value)}"


def spec_view(
    store: Any, spec: Spec, relation: str, *, quote: Quote = sql_quote, scan: str | None = None
) -> View:
    """Return the View a check would have on `relation` as `spec` says.

    A `keep` rule makes the view a query over `scan` (default: the relation itself).
    """
    where: dict[str, Any] = {"table": spec.relation or relation}
    if spec.keep is not None:
        where = {
            "query": f"SELECT * FROM {scan or where['table']} WHERE {where_sql(spec.keep, quote)}"
        }
    return make_view(
        store,
        **spec.view_args(),
        exclusions=tuple(Exclusion(r.name, where=where_sql(r, quote)) for r in spec.exclusions),
        **where,
    )


def golden_type(types: Mapping[str, str], type_: str, value: Any, naive: str, aware: str) -> str:
    """Return a golden value's SQL type: from `types`, or for a timestamp `naive` (no zone,
    which must read as UTC) or `aware`."""
    if type_ != "timestamp":
        return types[type_]
    if value is not None and datetime.fromisoformat(value).tzinfo is None:
        return naive
    return aware


def cast_literal(value: Any, type_: str, sql_type: str, quote: Quote = sql_quote) -> str:
    """Return a golden value as a typed SQL literal (NULL and booleans bare)."""
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if type_ == "boolean":
        return "TRUE" if value else "FALSE"
    return f"CAST({quote(value)} AS {sql_type})"


def golden_names(vector: dict[str, Any]) -> list[str]:
    """Return a golden row's column names: k, t, then c0, c1, ... for its fields."""
    return ["k", "t"] + [f"c{i}" for i in range(len(vector["fields"]))]


def one_row_select(cols: Sequence[str], vector: dict[str, Any]) -> str:
    """Return `SELECT col AS name, ...` holding a golden vector's one row."""
    pairs = zip(cols, golden_names(vector), strict=True)
    return "SELECT " + ", ".join(f"{c} AS {n}" for c, n in pairs)


def golden_view(store: Any, vector: dict[str, Any], **where: str) -> View:
    """Return the view over one golden vector's row (`table=` or `query=`)."""
    args: dict[str, Any] = {**Spec.of_golden(vector).view_args(), **where}
    return make_view(store, **args)


def unreachable_view(store: Any, spec: Spec) -> View:
    """Return a view of `spec`'s fields on table items of `store` (one nothing listens for)."""
    return make_view(store, key=spec.key, time=spec.time, fields=dict(spec.fields), table="items")


@dataclass
class QueryGolden:
    """One-row queries holding each vector with real column types (engines that read queries)."""

    vectors: Sequence[dict[str, Any]]
    _: KW_ONLY
    store: Any
    dialect: Any
    run: Callable[[str], Awaitable[list[dict[str, Any]]]]
    literal: Callable[[Any, str], str]
    time_literal: str

    def view(self, n: int) -> View:
        """Return a view over vector n's one-row query."""
        vector = self.vectors[n]
        cols = [self.literal(vector["key"], vector["key_type"]), self.time_literal]
        cols += [self.literal(f["value"], f["type"]) for f in vector["fields"]]
        return golden_view(self.store, vector, query=one_row_select(cols, vector))

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return an adapter on vector n's query (decimals are DECIMAL(38,18))."""
        assert not double
        return await open_adapter(self.view(n))

    async def encoding(self, n: int) -> str:
        """Return what the dialect's encoding SQL computes for vector n's row."""
        view_ = self.view(n)
        sql = self.dialect.row_encoding_sql(view_)
        rows = await self.run(f"SELECT {sql} AS e FROM {self.dialect.relation(view_)}")
        return str(rows[0]["e"])

    async def drop(self) -> None:
        """Nothing stored outside the queries."""
