"""What Elasticsearch 7.10 does differently from OpenSearch for the opensearch adapter."""

from __future__ import annotations

from driftgauge.stores.opensearch.client import Engine

ELASTICSEARCH = Engine(
    name="Elasticsearch",
    pit_open="_pit",
    # 7.10 refuses allow_partial_pit_creation (400 unrecognized parameter) and opens a PIT
    # only when every shard answers; each page's _shards is checked all the same.
    pit_open_params={},
    pit_id_field="id",
    pit_close="/_pit",
    pit_close_body=lambda pit_id: {"id": pit_id},
    # The open answer is {"id": ...} only: no _shards to check.
    pit_open_reports_shards=False,
)
