"""What a Spark view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.stores.preflight import FieldSchema, TypeRules
from driftgauge.stores.spark.dialect import SPARK
from driftgauge.stores.spark.io import ConnectSession

INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})
TIMES = frozenset({"timestamp", "timestamp_ntz", "date"})
NESTED = ("array<", "map<", "struct<")


def base_type(type_name: str) -> str:
    """Return a Spark type without its parameters: decimal(12,2) is decimal."""
    return type_name.split("(", 1)[0].strip().lower()


RULES = TypeRules.of_scalars(
    INTEGERS,
    TIMES,
    ("string",),
    ("double", "float"),
    base=base_type,
    nested=lambda t: t.startswith(NESTED),
)


async def describe(session: ConnectSession, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from the schema of the view's relation."""
    return RULES.judge_schema(view, await session.schema(f"SELECT * FROM {SPARK.relation(view)}"))
