"""The elasticsearch store's `stores.NAME` model; its runtime store is an OpenSearchStore."""

from __future__ import annotations

from typing import Literal

from driftgauge.stores.opensearch.settings import ClusterModel


class ElasticsearchStoreModel(ClusterModel):
    kind: Literal["elasticsearch"]
