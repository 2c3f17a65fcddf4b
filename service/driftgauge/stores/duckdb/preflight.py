"""What a DuckDB view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.duckdb.dialect import DUCKDB
from driftgauge.stores.duckdb.io import Connection
from driftgauge.stores.preflight import FieldSchema, TypeRules

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


def base_type(type_name: str) -> str:
    """Return a DuckDB type without its parameters: DECIMAL(12,2) is DECIMAL."""
    return type_name.split("(", 1)[0].strip()


def _nested(type_name: str) -> bool:
    return type_name.endswith("]") or base_type(type_name) in {"STRUCT", "MAP", "UNION"}


def _precision(type_name: str) -> TimestampPrecision:
    return "ms" if base_type(type_name) in MILLIS else "us"


RULES = TypeRules.of_scalars(
    INTEGERS,
    TIMES,
    ("VARCHAR",),
    ("DOUBLE", "FLOAT"),
    decimal="DECIMAL",
    boolean="BOOLEAN",
    base=base_type,
    nested=_nested,
    precision=_precision,
)


async def describe(conn: Connection, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from DESCRIBE of the view's relation."""
    rows = await conn.fetch(f"DESCRIBE SELECT * FROM {DUCKDB.relation(view)}")
    return RULES.judge_schema(view, [(str(r["column_name"]), str(r["column_type"])) for r in rows])
