"""The SQL dialect base: PostgreSQL's queries are unchanged, and another engine is its spellings."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from driftgauge.config.frozen import Exclusion, Field, View
from driftgauge.config.secrets import Secret
from driftgauge.core.fields import FieldType, RowHashName, TimestampPrecision
from driftgauge.stores.postgres.dialect import POSTGRES as pg
from driftgauge.stores.postgres.settings import PostgresStore
from driftgauge.stores.sql.dialect import SqlDialect

FIELDS = (
    Field("a", "string"),
    Field("b", "integer"),
    Field("c", "decimal"),
    Field("d", "boolean"),
    Field("e", "timestamp"),
)
TYPES: tuple[FieldType, ...] = ("string", "integer", "decimal", "boolean", "timestamp")
PRECISIONS: tuple[TimestampPrecision, ...] = ("us", "ms")
POSTGRES_SQL = "c00b2ea3c55892f4d91efa19b3cc7598dbd6a98050df8cc7a60b0795346c8e18"
"""sha256 of every query below as PostgreSQL receives it: any change to it is deliberate.

Set when the dialect base came (no query changed then), and again when timestamp tokens
took exact bigint epoch microseconds instead of numerics (the golden vectors, run on the
real engine, hold the values), and again when they took the float fast path between
1970 and 2038 (tests/integration/test_pg_epoch_micros.py holds it to the exact form),
and again when a view without exclusion rules took plain aggregates, no FILTER.
"""


def _views() -> list[View]:
    store = PostgresStore("pg", Secret("postgresql://x@h/db"))
    out = []
    for key_type in ("string", "integer"):
        for precision in PRECISIONS:
            for rules in ((), (Exclusion("r1", where="a IS NULL"), Exclusion("r2", where="b > 3"))):
                for where in ({"table": "public.items"}, {"query": "SELECT * FROM t;  "}):
                    out.append(
                        View(
                            store=store,
                            key_column="id",
                            time_column="ts",
                            columns=("ca", "cb", "cc", "cd", "ce"),
                            fields=FIELDS,
                            key_type=key_type,
                            timezone=ZoneInfo("Europe/Berlin"),
                            exclusions=rules,
                            timestamp_precision=precision,
                            **where,  # type: ignore[arg-type]
                        )
                    )
    return out


def _queries(d: Any, view: View) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bucket": d.bucket_sql(view),
        "slot": d.slot_sql(view),
        "slot_rows": d.slot_sql(view, distinct=False),
        "day_slot": d.day_slot_sql(view),
        "vc": d.value_counts_sql(view, "ca"),
        "rel": d.relation(view),
        "renc": d.row_encoding_sql(view),
        "like": d.like_patterns(["a", "0f"]),
        "tok": [d.token_sql("x", t, p) for t in TYPES for p in PRECISIONS],
    }
    for within in (True, False):
        out[f"prefix{within}"] = d.prefix_sql(view, within=within)
        for ranges in (None, 1, 3):
            out[f"rows{within}{ranges}"] = d.rows_sql(view, within=within, ranges=ranges)
    return out


def test_postgres_receives_the_same_sql_as_before_the_dialect_base() -> None:
    text = json.dumps([_queries(pg, v) for v in _views()], indent=0, sort_keys=True)
    assert hashlib.sha256(text.encode()).hexdigest() == POSTGRES_SQL


class Spelled(SqlDialect):
    """An engine without FILTER, :: casts or LIKE ANY: only its spellings are written."""

    name = "spelled"
    row_hashes: ClassVar[Mapping[RowHashName, str]] = {"md5": "hash64({0})"}

    def param(self, n: int, type_: str | None = None) -> str:
        return f"%(p{n})s"

    def decimal_text(self, expr: str) -> str:
        return f"dec_text({expr})"

    def instant(self, expr: str) -> str:
        return f"utc({expr})"

    def epoch_micros(self, col: str, precision: TimestampPrecision) -> str:
        return f"micros({col}, '{precision}')"

    def key_distinct(self, view: View) -> str:
        return self.quote_ident(view.key_column)

    def prefix_in(self, khash: str, param: str) -> str:
        return f"starts_any({khash}, {param})"

    def bucket(self, t: str) -> str:
        return f"local_day({t}, {self.param(4)})"

    def slot(self, t: str) -> str:
        return f"slot_of({t}, {self.param(3)}, {self.param(4)})"


def test_another_sql_engine_is_only_its_spellings() -> None:
    view = _views()[10]  # integer keys, two rules, a table
    sql = Spelled().bucket_sql(view)
    assert "FILTER" not in sql and "::" not in sql and "$" not in sql
    assert "count(DISTINCT CASE WHEN r.x IS NULL THEN r.kd END)" in sql
    assert "sum(CASE WHEN r.x IS NULL THEN hash64(renc) END) AS digest" in sql
    assert "local_day(r.t, %(p4)s) AS bucket" in sql
    assert 'WHERE "ts" >= %(p1)s AND "ts" < %(p2)s' in sql
    assert "CASE WHEN (a IS NULL) IS TRUE THEN 1 WHEN (b > 3) IS TRUE THEN 2 END AS x" in sql
    assert sql.count("CAST((") > 0
