"""What a MariaDB view holds for each configured field: its columns' types (no rows read)."""

from __future__ import annotations

from typing import Any

from pymysql.constants import FIELD_TYPE as T

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.mariadb.dialect import MARIADB
from driftgauge.stores.preflight import Expects, FieldSchema, Wanted, judge_columns, wrong_type

NAMES = {
    T.DECIMAL: "decimal",
    T.NEWDECIMAL: "decimal",
    T.TINY: "tinyint",
    T.SHORT: "smallint",
    T.INT24: "mediumint",
    T.LONG: "int",
    T.LONGLONG: "bigint",
    T.YEAR: "year",
    T.BIT: "bit",
    T.FLOAT: "float",
    T.DOUBLE: "double",
    T.TIMESTAMP: "timestamp",
    T.DATETIME: "datetime",
    T.DATE: "date",
    T.NEWDATE: "date",
    T.TIME: "time",
    T.VARCHAR: "varchar",
    T.VAR_STRING: "varchar",
    T.STRING: "char",
    T.TINY_BLOB: "text",
    T.BLOB: "text",
    T.MEDIUM_BLOB: "text",
    T.LONG_BLOB: "text",
    T.JSON: "json",
    T.ENUM: "enum",
    T.SET: "set",
    T.GEOMETRY: "geometry",
}
INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year"})
TEXT = frozenset({"varchar", "char", "text", "enum"})
TIMES = frozenset({"datetime", "timestamp", "date"})
ACCEPTS: dict[Expects, frozenset[str] | None] = {
    "string": None,  # every type has a text form
    "integer": INTEGERS | TEXT,
    "decimal": INTEGERS | {"decimal"},
    "boolean": INTEGERS | {"bit"},
    "timestamp": TIMES,
    "time": TIMES,
}
"""Column types each field type reads from without a silent change of value."""
_BINARY_FLOAT = "it prints with an exponent and binary digits; use DECIMAL"
_TEXT_AS_BOOLEAN = "the text 'true' reads as 0"
WHY: dict[tuple[Expects, str], str] = {
    ("integer", "decimal"): "casting it to an integer rounds fractions away",
    ("decimal", "float"): _BINARY_FLOAT,
    ("decimal", "double"): _BINARY_FLOAT,
    ("boolean", "varchar"): _TEXT_AS_BOOLEAN,
    ("boolean", "text"): _TEXT_AS_BOOLEAN,
}


async def describe(conn: Any, view: View) -> list[FieldSchema]:
    """Return each wanted field's column type, from a `LIMIT 0` of the view."""
    async with conn.cursor() as cur:
        await cur.execute(f"SELECT * FROM {MARIADB.relation(view)} LIMIT 0")
        columns = {d[0]: d for d in cur.description or ()}
    where = f"table {view.table}" if view.table is not None else "the view's query"
    return judge_columns(
        view, columns, where, lambda w, column: judge(w, column[1], column[5] or 0, where)
    )


def judge(w: Wanted, type_code: int, scale: int, where: str) -> FieldSchema:
    """Return whether a column of `type_code` (with `scale` digits) reads as `w` expects."""
    name = NAMES.get(type_code, f"type {type_code}")
    holds = f"{name}({scale}) in {where}" if name in TIMES - {"date"} else f"{name} in {where}"
    accepts = ACCEPTS[w.expects]
    if accepts is not None and name not in accepts:
        return wrong_type(w, name, accepts, WHY.get((w.expects, name)), holds)
    precision: TimestampPrecision | None = None
    if w.expects == "timestamp":
        # DATETIME(6) keeps microseconds; fewer fractional digits compare at ms at best.
        precision = "us" if name != "date" and scale >= 6 else "ms"
    return FieldSchema(w, precision=precision, holds=holds)
