"""What a DuckDB view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.duckdb.dialect import DUCKDB
from driftgauge.stores.duckdb.io import Connection
from driftgauge.stores.preflight import Expects, FieldSchema, TypeRules, Wanted, judge_schema

INTEGERS = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "HUGEINT",
    }
)
TIMES = frozenset(
    {"TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_MS", "TIMESTAMP_S", "TIMESTAMP_NS", "DATE"}
)
MILLIS = frozenset({"TIMESTAMP_MS", "TIMESTAMP_S"})
ACCEPTS: dict[Expects, frozenset[str] | None] = {
    "string": None,  # every scalar type has a text form
    "integer": INTEGERS | {"VARCHAR"},
    "decimal": INTEGERS | {"DECIMAL"},
    "boolean": frozenset({"BOOLEAN", "VARCHAR"}),
    "timestamp": TIMES,
    "time": TIMES,
}
"""Column types each field type reads from; an integer wider than 64 bits fails loudly."""
WHY: dict[str, str] = {
    "DOUBLE": "a double's text is not the same on every store; cast it to DECIMAL",
    "FLOAT": "a float's text is not the same on every store; cast it to DECIMAL",
    "VARCHAR": "text is not checked for a plain decimal form; cast it to DECIMAL",
}


def base_type(type_name: str) -> str:
    """Return a DuckDB type without its parameters: DECIMAL(12,2) is DECIMAL."""
    return type_name.split("(", 1)[0].strip()


def _nested(type_name: str) -> bool:
    return type_name.endswith("]") or base_type(type_name) in {"STRUCT", "MAP", "UNION"}


RULES = TypeRules(ACCEPTS, WHY, base_type, _nested)


async def describe(conn: Connection, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from DESCRIBE of the view's relation."""
    rows = await conn.fetch(f"DESCRIBE SELECT * FROM {DUCKDB.relation(view)}")
    return judge_schema(view, [(str(r["column_name"]), str(r["column_type"])) for r in rows], judge)


def judge(w: Wanted, type_name: str, where: str) -> FieldSchema:
    """Return whether a column of `type_name` can be read as the field `w` expects."""
    holds = f"{type_name} in {where}"
    refused = RULES.refusal(w, type_name, holds)
    if refused is not None:
        return refused
    precision: TimestampPrecision | None = None
    if w.expects == "timestamp":
        precision = "ms" if base_type(type_name) in MILLIS else "us"
    return FieldSchema(w, precision=precision, holds=holds)
