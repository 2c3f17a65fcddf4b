"""A nested or floating column is refused by name on DuckDB, Trino and Spark, before counting."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftgauge.configfile.loader import load_text
from driftgauge.stores.preflight import verify_all
from tests.conformance.kind_spark import SPARK_URL
from tests.conformance.kind_trino import TRINO_URL
from tests.integration.conftest import PG_DSN

pytestmark = pytest.mark.integration

# One row per engine with a list column and a double beside a key and a time.
ENGINES = {
    "duckdb": (
        # A DuckDB store reads some file; the query reads none of it.
        "{kind: duckdb, files: {unused: {csv: <CSV>}}}",
        "SELECT '1' AS id, TIMESTAMP '2026-01-01 00:00:00' AS ts, [1, 2] AS tags,"
        " CAST(1.5 AS DOUBLE) AS amount",
        "INTEGER[]",
        "DOUBLE",
    ),
    "trino": (
        f"{{kind: trino, url: {TRINO_URL!r}}}",
        "SELECT '1' AS id, TIMESTAMP '2026-01-01 00:00:00' AS ts, ARRAY[1, 2] AS tags,"
        " CAST(1.5 AS double) AS amount",
        "array(integer)",
        "double",
    ),
    "spark": (
        f"{{kind: spark, url: {SPARK_URL!r}}}",
        "SELECT '1' AS id, TIMESTAMP '2026-01-01 00:00:00' AS ts, array(1, 2) AS tags,"
        " CAST(1.5 AS double) AS amount",
        "array<int>",
        "double",
    ),
}


def _config(store: str, query: str) -> str:
    view = f'{{store: engine, query: "{query}", key: id, time: ts}}'
    return f"""
stores:
  engine: {store}
state: {{dsn: "{PG_DSN}"}}
checks:
  shapes:
    source: {view}
    reader: {view}
    key_type: string
    fields: {{tags: string, amount: decimal}}
"""


@pytest.mark.parametrize("engine", sorted(ENGINES))
async def test_a_list_and_a_double_are_refused_naming_the_field(
    engine: str, tmp_path: Path
) -> None:
    store, query, list_type, double_type = ENGINES[engine]
    csv = tmp_path / "unused.csv"
    csv.write_text("a\n1\n", encoding="utf-8")
    store = store.replace("<CSV>", repr(str(csv)))
    problems = await verify_all(load_text(_config(store, query), source=f"{engine}.yml"))
    for side in ("source", "reader"):
        tags = [p for p in problems if p.startswith(f"checks.shapes.{side}.fields.tags:")]
        assert tags == [
            f"checks.shapes.{side}.fields.tags: column tags is {list_type};"
            " a field holds one value per row"
        ], problems
        amount = [p for p in problems if p.startswith(f"checks.shapes.{side}.fields.amount:")]
        assert len(amount) == 1, problems
        assert f"column amount is {double_type} (a double's text" in amount[0]
        assert "cast it to DECIMAL" in amount[0]
    assert len(problems) == 4, problems
