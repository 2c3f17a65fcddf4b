"""What a PostgreSQL view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from typing import Any

from driftgauge.config.runtime import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.encoding.digest import row_hash
from driftgauge.stores.postgres.dialect import POSTGRES
from driftgauge.stores.preflight import Expects, FieldSchema, Wanted, judge_columns, wrong_type

TEXT = frozenset({"text", "varchar", "bpchar", "name", "citext"})
INTEGERS = frozenset({"int2", "int4", "int8"})
TIMES = frozenset({"timestamptz", "timestamp", "date"})
ACCEPTS: dict[Expects, frozenset[str] | None] = {
    "string": None,  # every type has a text form
    "integer": INTEGERS | TEXT,
    "decimal": INTEGERS | TEXT | {"numeric", "float4", "float8"},
    "boolean": TEXT | {"bool"},
    "timestamp": TIMES,
    "time": TIMES,
}
"""Column types each field type reads from; text converts or fails loudly, never quietly."""
WHY: dict[str, str] = {
    "numeric": "casting it to bigint rounds fractions away",
    "float4": "casting it to bigint rounds fractions away",
    "float8": "casting it to bigint rounds fractions away",
}


async def describe(conn: Any, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from a prepared `LIMIT 0` of the view."""
    stmt = await conn.prepare(f"SELECT * FROM {POSTGRES.relation(view)} LIMIT 0")
    types: dict[str, Any] = {}
    for attr in stmt.get_attributes():
        types.setdefault(attr.name, attr.type)
    where = f"table {view.table}" if view.table is not None else "the view's query"
    out = judge_columns(
        view, types, where, lambda w, typ: judge(w, str(typ.name), str(typ.kind), where)
    )
    if view.row_hash == "lookup3":
        out.append(await judge_row_hash(conn, view))
    return out


ROW_HASH_PROBE = "S2:k1S5:héllo😀 and twelve+ bytes"
"""A row encoding whose hash exercises whole words, a tail and multi-byte characters."""


async def judge_row_hash(conn: Any, view: View) -> FieldSchema:
    """Return whether this server's lookup3 row hash is the one Python computes.

    hashtextextended reads its input as native-endian words: a big-endian server (or a
    future change) would hash every row differently, so it is probed, not assumed.
    """
    template = POSTGRES.row_hashes["lookup3"]
    got = await conn.fetchval(f"SELECT {template.format('$1::text')}", ROW_HASH_PROBE)
    problems: tuple[str, ...] = ()
    if got is None or int(got) % 2**64 != row_hash(ROW_HASH_PROBE, "lookup3"):
        problems = (
            "this server's hashtextextended() differs from lookup3 as driftgauge computes "
            "it (a big-endian server?); set the check's row_hash: md5",
        )
    return FieldSchema(Wanted("row_hash", "", "string"), problems)


def judge(w: Wanted, type_name: str, kind: str, where: str) -> FieldSchema:
    """Return whether a column of `type_name` can be read as the field `w` expects."""
    holds = f"{type_name} in {where}"
    if kind == "array":
        return FieldSchema(
            w,
            (f"column {w.column} is an array ({type_name}); a field holds one value per row",),
            holds=holds,
        )
    accepts = ACCEPTS[w.expects]
    if accepts is not None and type_name not in accepts:
        why = WHY.get(type_name) if w.expects == "integer" else None
        return wrong_type(w, type_name, accepts, why, holds)
    if w.measure_scale is not None and type_name in ("float4", "float8"):
        return FieldSchema(
            w,
            (
                f"column {w.column} is {type_name}, whose values are not exact "
                "decimals; a measure's total must be exact (use numeric)",
            ),
            holds=holds,
        )
    precision: TimestampPrecision | None = "us" if w.expects == "timestamp" else None
    return FieldSchema(w, precision=precision, holds=holds)
