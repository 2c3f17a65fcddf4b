"""The elasticsearch kind's fixtures: the opensearch ones on the real local Elasticsearch."""

from __future__ import annotations

import os

from tests.conformance.kind_opensearch import OpenSearchFixtures

ES_URL = os.environ.get("DRIFTGAUGE_TEST_ES_URL", "http://127.0.0.1:9260")


def elasticsearch_fixtures() -> OpenSearchFixtures:
    """Return the fixtures of the elasticsearch kind (deploy/local/elasticsearch.sh)."""
    return OpenSearchFixtures(ES_URL, "elasticsearch")
