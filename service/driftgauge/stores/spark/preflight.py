"""What a Spark view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.preflight import Expects, FieldSchema, TypeRules, Wanted, judge_schema
from driftgauge.stores.spark.dialect import SPARK
from driftgauge.stores.spark.io import ConnectSession

INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})
TIMES = frozenset({"timestamp", "timestamp_ntz", "date"})
ACCEPTS: dict[Expects, frozenset[str] | None] = {
    "string": None,  # every scalar type has a text form
    "integer": INTEGERS | {"string"},
    "decimal": INTEGERS | {"decimal"},
    "boolean": frozenset({"boolean", "string"}),
    "timestamp": TIMES,
    "time": TIMES,
}
"""Column types each field type reads from; an integer beyond 64 bits fails loudly."""
WHY: dict[str, str] = {
    "double": "a double's text is not the same on every store; cast it to DECIMAL",
    "float": "a float's text is not the same on every store; cast it to DECIMAL",
    "string": "text is not checked for a plain decimal form; cast it to DECIMAL",
}
NESTED = ("array<", "map<", "struct<")


def base_type(type_name: str) -> str:
    """Return a Spark type without its parameters: decimal(12,2) is decimal."""
    return type_name.split("(", 1)[0].strip().lower()


RULES = TypeRules(ACCEPTS, WHY, base_type, lambda t: t.startswith(NESTED))


async def describe(session: ConnectSession, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from the schema of the view's relation."""
    return judge_schema(view, await session.schema(f"SELECT * FROM {SPARK.relation(view)}"), judge)


def judge(w: Wanted, type_name: str, where: str) -> FieldSchema:
    """Return whether a column of `type_name` can be read as the field `w` expects."""
    holds = f"{type_name} in {where}"
    refused = RULES.refusal(w, type_name, holds)
    if refused is not None:
        return refused
    precision: TimestampPrecision | None = "us" if w.expects == "timestamp" else None
    return FieldSchema(w, precision=precision, holds=holds)
