"""The elasticsearch store kind: the opensearch kind with Elasticsearch's point-in-time calls."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from driftgauge.config.frozen import View
from driftgauge.stores import registry
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.elasticsearch.settings import ElasticsearchStoreModel
from driftgauge.stores.opensearch import kind as opensearch


async def open_adapter(view: View, handle: Any) -> StoreAdapter:
    """Return the opensearch adapter speaking Elasticsearch's PIT API to the cluster."""
    from driftgauge.stores.elasticsearch.engine import ELASTICSEARCH
    from driftgauge.stores.opensearch.adapter import OpenSearchAdapter

    return await OpenSearchAdapter.open(view, handle, ELASTICSEARCH)


KIND = replace(
    opensearch.KIND,
    name="elasticsearch",
    config_model=ElasticsearchStoreModel,
    check_view=functools.partial(opensearch.check_cluster_view, "elasticsearch"),
    opener=open_adapter,
    # No canary writer: the canary's write path is tested on OpenSearch only.
    capabilities=opensearch.KIND.capabilities - {registry.CANARY_WRITER},
)
