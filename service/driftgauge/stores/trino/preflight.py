"""What a Trino view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.preflight import Expects, FieldSchema, TypeRules, Wanted, judge_schema
from driftgauge.stores.trino.dialect import TRINO
from driftgauge.stores.trino.io import TrinoSession

INTEGERS = frozenset({"tinyint", "smallint", "integer", "bigint"})
TIMES = frozenset({"timestamp", "timestamp with time zone", "date"})
ACCEPTS: dict[Expects, frozenset[str] | None] = {
    "string": None,  # every scalar type has a text form
    "integer": INTEGERS | {"varchar", "char"},
    "decimal": INTEGERS | {"decimal"},
    "boolean": frozenset({"boolean", "varchar"}),
    "timestamp": TIMES,
    "time": TIMES,
}
"""Column types each field type reads from; an integer beyond 64 bits fails loudly."""
WHY: dict[str, str] = {
    "double": "a double's text is not the same on every store; cast it to DECIMAL",
    "real": "a real's text is not the same on every store; cast it to DECIMAL",
    "varchar": "text is not checked for a plain decimal form; cast it to DECIMAL",
}
NESTED = ("array(", "map(", "row(")


def base_type(type_name: str) -> str:
    """Return a Trino type without its parameters: timestamp(3) with time zone is
    timestamp with time zone, decimal(12,2) is decimal."""
    name = type_name.strip().lower()
    while "(" in name and not name.startswith(NESTED):
        head, _, rest = name.partition("(")
        name = head + rest.partition(")")[2]
    return " ".join(name.split())


def fraction_digits(type_name: str) -> int | None:
    """Return the precision of a timestamp type (its fractional digits), None for others."""
    name = type_name.strip().lower()
    if not name.startswith("timestamp("):
        return None
    return int(name[len("timestamp(") :].partition(")")[0])


RULES = TypeRules(ACCEPTS, WHY, base_type, lambda t: t.lower().startswith(NESTED))


async def describe(session: TrinoSession, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from the schema of the view's relation."""
    return judge_schema(view, await session.schema(f"SELECT * FROM {TRINO.relation(view)}"), judge)


def judge(w: Wanted, type_name: str, where: str) -> FieldSchema:
    """Return whether a column of `type_name` can be read as the field `w` expects."""
    holds = f"{type_name} in {where}"
    refused = RULES.refusal(w, type_name, holds)
    if refused is not None:
        return refused
    digits = fraction_digits(type_name)
    if w.expects in ("timestamp", "time") and digits is not None and digits > 6:
        # Casting to microseconds rounds in Trino where every other kind floors.
        problem = f"column {w.column} is {type_name}; cast it to timestamp(6) (microseconds)"
        return FieldSchema(w, (problem,), holds=holds)
    precision: TimestampPrecision | None = None
    if w.expects == "timestamp":
        precision = "ms" if digits is not None and digits <= 3 else "us"
    return FieldSchema(w, precision=precision, holds=holds)
