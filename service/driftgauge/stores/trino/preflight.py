"""What a Trino view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.preflight import FieldSchema, TypeRules, Wanted
from driftgauge.stores.trino.dialect import TRINO
from driftgauge.stores.trino.io import TrinoSession

INTEGERS = frozenset({"tinyint", "smallint", "integer", "bigint"})
TIMES = frozenset({"timestamp", "timestamp with time zone", "date"})
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


def precision(type_name: str) -> TimestampPrecision:
    """Return the finest precision a timestamp type holds: ms up to three fractional digits."""
    digits = fraction_digits(type_name)
    return "ms" if digits is not None and digits <= 3 else "us"


def limit(w: Wanted, type_name: str) -> str | None:
    """Return why a time field cannot read a timestamp finer than microseconds, or None."""
    digits = fraction_digits(type_name)
    if w.expects in ("timestamp", "time") and digits is not None and digits > 6:
        # Casting to microseconds rounds in Trino where every other kind floors.
        return f"column {w.column} is {type_name}; cast it to timestamp(6) (microseconds)"
    return None


RULES = TypeRules.of_scalars(
    INTEGERS,
    TIMES,
    ("varchar", "char"),
    ("double", "real"),
    base=base_type,
    nested=lambda t: t.lower().startswith(NESTED),
    precision=precision,
    limit=limit,
)


async def describe(session: TrinoSession, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from the schema of the view's relation."""
    return RULES.judge_schema(view, await session.schema(f"SELECT * FROM {TRINO.relation(view)}"))
