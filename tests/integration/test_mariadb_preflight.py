"""The MariaDB preflight names the columns that would read wrong, before anything is counted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from driftgauge.stores.preflight import FieldSchema, Inspectable
from tests.conformance import kind_mariadb as my
from tests.integration.conftest import make_view
from tests.integration.runs import opened

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def dsn() -> AsyncIterator[str]:
    """Yield a database with one table of every column kind the preflight judges."""
    dsn = await my.new_database()
    await my.execute(
        "CREATE TABLE t (k VARCHAR(20), ts DATETIME(6), ts3 DATETIME(3), "
        "ts0 TIMESTAMP NULL, d DATE, amount DECIMAL(12,2), ratio DOUBLE, "
        "n BIGINT, flag BOOLEAN, flag_text VARCHAR(5), label TEXT)",
        dsn=dsn,
    )
    try:
        yield dsn
    finally:
        await my.drop_database(dsn)


async def _describe(dsn: str, fields: dict[str, tuple[str, str]]) -> dict[str, FieldSchema]:
    view = make_view(
        my.store(dsn),  # type: ignore[arg-type]
        key="k",
        time="ts",
        fields=fields,
        table="t",
    )
    async with opened(view) as adapter:
        assert isinstance(adapter, Inspectable)
        return {fs.wanted.role: fs for fs in await adapter.inspect_fields()}


async def test_readable_columns_pass_with_their_timestamp_precision(dsn: str) -> None:
    got = await _describe(
        dsn,
        {
            "a": ("amount", "decimal"),
            "n": ("n", "integer"),
            "f": ("flag", "boolean"),
            "l": ("label", "string"),
            "us": ("ts", "timestamp"),
            "ms": ("ts3", "timestamp"),
            "s": ("ts0", "timestamp"),
            "day": ("d", "timestamp"),
        },
    )
    assert {role: fs.problems for role, fs in got.items() if fs.problems} == {}
    assert {
        role: got[role].precision for role in ("fields.us", "fields.ms", "fields.s", "fields.day")
    } == {"fields.us": "us", "fields.ms": "ms", "fields.s": "ms", "fields.day": "ms"}


@pytest.mark.parametrize(
    ("column", "type_", "why"),
    [
        ("ratio", "decimal", "double (it prints with an exponent"),
        ("flag_text", "boolean", "varchar (the text 'true' reads as 0)"),
        ("amount", "integer", "decimal (casting it to an integer rounds fractions away)"),
        ("label", "timestamp", "text; a timestamp field reads one of date, datetime, timestamp"),
        ("nope", "string", "column nope does not exist in table t (it has k, ts, "),
    ],
)
async def test_a_column_that_would_read_wrong_is_named(
    dsn: str, column: str, type_: str, why: str
) -> None:
    (problem,) = (await _describe(dsn, {"x": (column, type_)}))["fields.x"].problems
    assert why in problem and column in problem
