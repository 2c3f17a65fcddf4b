"""The opensearch store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from driftgauge.config.secrets import Secret
from driftgauge.config.values import NonEmpty, Seconds, SecretRef, Url
from driftgauge.stores.registry import StoreLimits, StoreModel


@dataclass(frozen=True)
class OpenSearchStore(StoreLimits):
    """An OpenSearch cluster reached over HTTP."""

    name: str
    url: str
    username: str | None = None
    password: Secret | None = None
    timeout: float = 30.0
    verify_certs: bool = True
    kind: str = "opensearch"


class ClusterModel(StoreModel):
    """What a cluster the opensearch adapter reads is reached with (OpenSearch, Elasticsearch)."""

    url: Url = Field(description="Base URL of the cluster, e.g. http://127.0.0.1:9250.")
    username: NonEmpty | None = None
    password: SecretRef | None = Field(
        None, description="Secret reference (env:NAME or file:/path)."
    )
    timeout_seconds: Seconds = 30.0
    verify_certs: bool = True


class OpenSearchStoreModel(ClusterModel):
    kind: Literal["opensearch"]
