"""The kinds table: one line per store kind the conformance suite runs over.

Adding a kind: one line here and the kind's fixtures module (see spec.Fixtures). A line
names a kind of driftgauge.stores.registry, whose capabilities it takes; test_kinds.py
fails while a registered kind has no line.
"""

from __future__ import annotations

from tests.conformance.kind_duckdb import DuckDBFixtures
from tests.conformance.kind_elasticsearch import elasticsearch_fixtures
from tests.conformance.kind_mariadb import MariaDBFixtures
from tests.conformance.kind_memory import MemoryFixtures
from tests.conformance.kind_opensearch import OpenSearchFixtures
from tests.conformance.kind_postgres import PostgresFixtures
from tests.conformance.kind_reader_api import ReaderApiFixtures
from tests.conformance.kind_spark import SparkFixtures
from tests.conformance.kind_trino import TrinoFixtures
from tests.conformance.spec import Kind

KINDS = (
    Kind("postgres", PostgresFixtures()),
    Kind("opensearch", OpenSearchFixtures()),
    Kind("memory", MemoryFixtures(), registered=False),
    Kind("mariadb", MariaDBFixtures()),
    Kind("duckdb", DuckDBFixtures()),
    Kind("reader_api", ReaderApiFixtures()),
    Kind("elasticsearch", elasticsearch_fixtures()),
    Kind("spark", SparkFixtures()),
    Kind("trino", TrinoFixtures()),
)
