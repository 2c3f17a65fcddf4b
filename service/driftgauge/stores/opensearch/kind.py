"""The opensearch store kind: its config, its view rules and how to open it (client lazily)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from driftgauge.config.frozen import Store
from driftgauge.config.secrets import Secret
from driftgauge.stores import registry
from driftgauge.stores.opensearch.settings import (
    ClusterModel,
    OpenSearchStore,
    OpenSearchStoreModel,
)


def build(name: str, sm: ClusterModel, problems: list[str]) -> OpenSearchStore:
    """Return the runtime store of a validated `stores.NAME` entry (of this kind or a variant)."""
    pw = Secret(sm.password) if sm.password is not None else None
    return OpenSearchStore(
        name, sm.url.rstrip("/"), sm.username, pw, sm.timeout_seconds, sm.verify_certs, sm.kind
    )


def check_cluster_view(
    kind: str, where: str, vm: Any, exclusions: Sequence[Any], problems: list[str]
) -> None:
    """Append what a view of `kind`, read by the opensearch adapter, gets wrong."""
    if vm.index is None:
        problems.append(f"{where}.index: field required for an {kind} view")
    registry.refuse_keys(where, vm, ("query", "table"), "only for postgres views", problems)
    registry.check_exclusions(where, exclusions, kind, "query", "query DSL", problems)


check_view = functools.partial(check_cluster_view, "opensearch")
"""Append what an opensearch view (and its source's exclusions) gets wrong."""


def store_secrets(store: Store) -> list[tuple[str, Secret, str]]:
    """Return the store's password reference, if it has one."""
    assert isinstance(store, OpenSearchStore)
    return [] if store.password is None else [("password", store.password, "password")]


KIND = registry.StoreKind(
    __package__,
    "OpenSearchAdapter",
    OpenSearchStoreModel,
    build=build,
    check_view=check_view,
    secrets=store_secrets,
    capabilities=frozenset(
        {
            registry.COMPOSITE_KEYS,
            registry.MEASURE_TOTALS,
            registry.SCALED_MEASURES,
            registry.RETRIED_READS,
            registry.SLOT_FIRST_PASS,
            registry.CANARY_WRITER,
            registry.LOOKUP3_ROW_HASH,
        }
    ),
    io="client",
)
