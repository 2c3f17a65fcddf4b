"""The spark kind's fixtures: each table Parquet files under a Spark table on Spark Connect.

The server is the local one of deploy/local/spark.sh (`make services` starts it), at
DRIFTGAUGE_TEST_SPARK_URL or the address stack.sh derives.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tools.local_stores import address

from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.spark import io
from driftgauge.stores.spark.dialect import SPARK
from driftgauge.stores.spark.settings import SparkStore
from tests.conformance.parquet import Engine, EngineTable
from tests.conformance.spec import (
    DESCRIBES_FIELDS,
    ENGINE_ENCODING,
    FIELD_ERRORS,
    ROW_CHANGES,
    STORE_ERRORS,
    Failures,
    Hung,
    Spec,
    Table,
)
from tests.conformance.sql_views import (
    QueryGolden,
    cast_literal,
    golden_type,
    unreachable_view,
)
from tests.integration.conftest import TIMEOUT

SPARK_URL = address("DRIFTGAUGE_TEST_SPARK_URL")
GOLDEN_TYPES = {
    "string": "STRING",
    "integer": "BIGINT",
    "decimal": "DECIMAL(38,18)",
    "boolean": "BOOLEAN",
}


def store(url: str = SPARK_URL, timeout: float = TIMEOUT) -> SparkStore:
    """Return a SparkStore on the test server."""
    return SparkStore("spark", url, None, timeout)


def quote(value: Any) -> str:
    """Return a Spark SQL string literal (backslashes are escapes there)."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


ENGINE = Engine(store, quote, io.store_pool)
run = ENGINE.run


class SparkSource(EngineTable):
    """A table over one Parquet file in a directory of its own."""

    engine = ENGINE

    def create_sql(self) -> str:
        """Return the statement creating the Spark table over the file's folder."""
        return f"CREATE TABLE {self.name} USING parquet LOCATION {quote(self.path.parent)}"

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """No fault proxy speaks gRPC here (TIMEOUTS is not claimed)."""
        raise NotImplementedError


def _literal(value: Any, type_: str) -> str:
    typ = golden_type(GOLDEN_TYPES, type_, value, "TIMESTAMP_NTZ", "TIMESTAMP")
    return cast_literal(value, type_, typ, quote)


class SparkFixtures:
    """Fixtures of the spark kind."""

    capabilities = frozenset(
        {ENGINE_ENCODING, STORE_ERRORS, FIELD_ERRORS, ROW_CHANGES, DESCRIBES_FIELDS}
    )
    failures: Failures | None = Failures(
        unreachable_match="connect to sc://127.0.0.1:1",
        missing_match=("no_such_table", "no_such_table"),
    )

    async def load(self, table: Table) -> SparkSource:
        """Write the table to Parquet and create a Spark table over it."""
        return await SparkSource.load(table, "dg_spark_")

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> QueryGolden:
        """Return one-row queries per vector."""
        return QueryGolden(
            vectors,
            store=store(),
            dialect=SPARK,
            run=run,
            literal=_literal,
            time_literal=f"CAST({quote(at.isoformat())} AS TIMESTAMP)",
        )

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a port nothing listens at (the session connects when opened)."""
        return await open_adapter(unreachable_view(store("sc://127.0.0.1:1"), spec))
