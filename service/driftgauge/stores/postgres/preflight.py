"""What a PostgreSQL view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from typing import Any

from driftgauge.config.frozen import View
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


UNIQUE_KEY = """
SELECT EXISTS (
  SELECT 1 FROM pg_index i
  JOIN pg_class c ON c.oid = i.indrelid
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
  JOIN pg_type t ON t.oid = a.atttypid
  WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indisvalid
    AND i.indnkeyatts = 1 AND i.indpred IS NULL AND i.indexprs IS NULL
    AND a.attname = $2 AND a.attnotnull AND t.typname = ANY($3::text[])
    AND (c.relkind = 'p' OR NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhparent = c.oid))
)"""
"""Whether a valid, whole-table unique index on the NOT NULL key column alone exists.

Not a partial or expression index, and not a parent whose inheritance children it
does not cover (a partitioned table's unique index covers its partitions).
"""


def unique_key_args(view: View) -> tuple[str, str, str, list[str]] | None:
    """Return the query and arguments telling whether the view's keys are unique by
    constraint; None when no constraint could say so (a query view, a composite key).

    Unique values stay distinct as the key is counted only from these column types: an
    integer key from an integer column, a string key from an integer or text one (a
    text column read as integer maps '07' and '7' to one key).
    """
    if view.table is None or view.composite:
        return None
    types = INTEGERS if view.key_type == "integer" else INTEGERS | TEXT
    relation = ".".join(POSTGRES.quote_ident(part) for part in view.table.split("."))
    return UNIQUE_KEY, relation, view.key_column, sorted(types)


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
