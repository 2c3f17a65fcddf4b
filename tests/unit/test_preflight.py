"""The preflight's rules: type judgement, timestamp precision, where each problem is named."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from driftgauge.config.frozen import Check, View
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError, SchemaError
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.opensearch import preflight as preflight_os
from driftgauge.stores.postgres import preflight as preflight_pg
from driftgauge.stores.postgres.dialect import POSTGRES as pg_sql
from driftgauge.stores.preflight import FieldSchema, Wanted, preflight, wanted

from .config_text import config_head

CHECK = """
  c:
    source: {store: pg, table: t, key: id, time: ts}
    reader: {store: os, index: i, key: id, time: ts, fields: {at: at_ms}}
    fields: {at: timestamp, label: string}
"""


def _check(extra: str = "") -> Check:
    text = config_head(pg="postgres", os="opensearch") + CHECK + extra
    return load_text(text).checks["c"]


@dataclass
class Described:
    """An in-memory adapter of our own Protocol that describes fixed fields."""

    view: View
    precision: TimestampPrecision | None = None
    problems: dict[str, str] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)

    async def inspect_fields(self) -> list[FieldSchema]:
        return [
            FieldSchema(
                w,
                tuple(p for r, p in self.problems.items() if r == w.role),
                precision=self.precision if w.expects == "timestamp" else None,
                holds="date in index i",
            )
            for w in wanted(self.view)
        ]

    def use_timestamp_precision(self, precision: TimestampPrecision) -> None:
        self.used.append(precision)

    # The rest of StoreAdapter is never called by the preflight.
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"preflight called {name}")


async def test_auto_takes_the_coarser_side_and_sets_it_on_both() -> None:
    check = _check()
    source, reader = Described(check.source, "us"), Described(check.reader, "ms")
    assert await preflight(check, source, reader) == "ms"
    assert source.used == reader.used == ["ms"]


async def test_auto_without_millisecond_fields_stays_microseconds() -> None:
    check = _check()
    sides = Described(check.source, "us"), Described(check.reader, "us")
    assert await preflight(check, *sides) == "us"


async def test_a_precision_finer_than_a_side_is_refused_naming_the_field() -> None:
    check = _check("    timestamp_precision: us\n")
    source, reader = Described(check.source, "us"), Described(check.reader, "ms")
    with pytest.raises(SchemaError) as caught:
        await preflight(check, source, reader)
    (problem,) = caught.value.problems
    assert problem.startswith("checks.c.reader.fields.at: field at_ms is date in index i")
    assert "milliseconds" in problem
    assert source.used == reader.used == []


async def test_ms_is_kept_when_configured() -> None:
    check = _check("    timestamp_precision: ms\n")
    assert check.source.timestamp_precision == check.reader.timestamp_precision == "ms"
    sides = Described(check.source, "us"), Described(check.reader, "us")
    assert await preflight(check, *sides) == "ms"


async def test_every_problem_of_both_sides_is_listed_with_its_location() -> None:
    check = _check()
    source = Described(check.source, problems={"time": "column ts is text"})
    reader = Described(check.reader, problems={"key": "no doc values", "fields.label": "gone"})
    with pytest.raises(SchemaError) as caught:
        await preflight(check, source, reader)
    assert caught.value.problems == [
        "checks.c.source.time: column ts is text",
        "checks.c.reader.key: no doc values",
        "checks.c.reader.fields.label: gone",
    ]
    assert isinstance(caught.value, ConfigError)


def test_an_unknown_precision_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="timestamp_precision"):
        _check("    timestamp_precision: ns\n")


def test_the_ms_token_floors_in_sql_too() -> None:
    # The microseconds within the minute are never negative, so integer division floors
    # them, before 1970 too (the golden vectors check the values on the real engines).
    sql = pg_sql.token_sql("at", "timestamp", "ms")
    assert "date_part('microseconds'" in sql and "/ 1000 * 1000" in sql
    assert "/ 1000 * 1000" not in pg_sql.token_sql("at", "timestamp")


@pytest.mark.parametrize(
    ("expects", "pg_type", "kind", "words"),
    [
        ("integer", "numeric", "scalar", ["numeric", "rounds fractions"]),
        ("time", "text", "scalar", ["the time field", "timestamptz"]),
        ("timestamp", "int8", "scalar", ["int8", "a timestamp field"]),
        ("string", "_text", "array", ["an array"]),
        ("boolean", "int4", "scalar", ["int4", "bool"]),
    ],
)
def test_postgres_column_types_that_would_misread(
    expects: str, pg_type: str, kind: str, words: list[str]
) -> None:
    w = Wanted("fields.x", "x", expects)  # type: ignore[arg-type]
    (problem,) = preflight_pg.judge(w, pg_type, kind, "table t").problems
    assert all(word in problem for word in words), problem


@pytest.mark.parametrize(
    ("expects", "pg_type"),
    [
        ("string", "uuid"),
        ("integer", "int4"),
        ("decimal", "float8"),
        ("timestamp", "date"),
        ("time", "timestamp"),
        ("integer", "text"),
    ],
)
def test_postgres_column_types_that_read_right(expects: str, pg_type: str) -> None:
    w = Wanted("fields.x", "x", expects)  # type: ignore[arg-type]
    assert preflight_pg.judge(w, pg_type, "scalar", "table t").problems == ()


@pytest.mark.parametrize(
    ("role", "expects", "mapping", "words"),
    [
        ("fields.x", "decimal", {"type": "float"}, ["32-bit float"]),
        (
            "fields.x",
            "string",
            {"type": "text", "fields": {"kw": {"type": "keyword"}}},
            ["text", "x.kw"],
        ),
        ("key", "string", {"type": "keyword", "normalizer": "lower"}, ["normalizer lower"]),
        ("key", "integer", {"type": "long", "doc_values": False}, ["doc_values: false"]),
        (
            "fields.x",
            "string",
            {"type": "keyword", "ignore_above": 256},
            ["ignore_above 256", "mismatched"],
        ),
        ("time", "time", {"type": "long"}, ["the time field", "date_nanos"]),
    ],
)
async def test_opensearch_mappings_that_would_misread(
    role: str, expects: str, mapping: dict[str, Any], words: list[str]
) -> None:
    w = Wanted(role, "x", expects)  # type: ignore[arg-type]
    problem = await preflight_os._judge(w, mapping, "i", None, _no_call)
    assert problem is not None and all(word in problem for word in words), problem


async def test_opensearch_index_false_reads_from_doc_values() -> None:
    w = Wanted("time", "ts", "time")
    assert (
        await preflight_os._judge(w, {"type": "date", "index": False}, "i", None, _no_call) is None
    )


async def _no_call(what: str, coro: Any) -> Any:
    raise AssertionError(f"unexpected request: {what}")
