"""The elasticsearch kind's fixtures: the opensearch ones on the real local Elasticsearch."""

from __future__ import annotations

from tools.local_stores import address

from tests.conformance.kind_opensearch import OpenSearchFixtures

ES_URL = address("DRIFTGAUGE_TEST_ES_URL")


def elasticsearch_fixtures() -> OpenSearchFixtures:
    """Return the fixtures of the elasticsearch kind (deploy/local/elasticsearch.sh)."""
    return OpenSearchFixtures(ES_URL, "elasticsearch")
