"""The store kinds table: one object per kind, and what the config and features take from it."""

from __future__ import annotations

import typing

import pytest

from driftgauge.configfile import model as m
from driftgauge.configfile.loader import load_text
from driftgauge.stores import registry
from driftgauge.stores.base import KeyQuery, SlotFirstPass, VocabularyCounter
from driftgauge.stores.mariadb.adapter import MariaDBAdapter
from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from driftgauge.stores.postgres.adapter import PostgresAdapter

from .config_text import config_head

CONFIG = (
    config_head(pg="postgres", os="opensearch")
    + """
  c:
    source: {store: pg, table: t, key: id, time: ts}
    reader: {store: os, index: i, key: id, time: ts}
"""
)
ADAPTERS = {"postgres": PostgresAdapter, "opensearch": OpenSearchAdapter, "mariadb": MariaDBAdapter}
PROTOCOLS = {
    registry.SLOT_FIRST_PASS: SlotFirstPass,
    registry.VOCABULARY_COUNTER: VocabularyCounter,
    registry.KEY_PICKER: KeyQuery,
}


def test_each_store_subpackage_exports_one_kind_named_after_it() -> None:
    kinds = registry.kinds()
    assert {"mariadb", "opensearch", "postgres"} <= set(kinds)
    for name, kind in kinds.items():
        assert kind.name == name
        assert typing.get_args(kind.config_model.model_fields["kind"].annotation) == (name,)


def test_the_config_union_has_one_member_per_kind() -> None:
    union = typing.get_args(m.ConfigModel.model_fields["stores"].annotation)[1]
    members = set(typing.get_args(typing.get_args(union)[0]))
    assert members == {k.config_model for k in registry.kinds().values()}


def test_the_loader_builds_each_store_with_its_kind() -> None:
    config = load_text(CONFIG)
    assert {n: s.kind for n, s in config.stores.items()} == {"pg": "postgres", "os": "opensearch"}
    for store in config.stores.values():
        assert registry.kind_of(store.kind).name == store.kind


def test_an_unknown_kind_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"no store kind 'nosuch' \(known: .*opensearch"):
        registry.kind_of("nosuch")


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_a_kinds_capabilities_are_what_its_adapter_implements(name: str) -> None:
    kind, adapter = registry.kind_of(name), ADAPTERS[name]
    for capability, protocol in PROTOCOLS.items():
        methods = [a for a in dir(protocol) if not a.startswith("_")]
        assert methods
        assert kind.has(capability) == all(hasattr(adapter, a) for a in methods), capability
    assert "opensearch" in registry.with_capability(registry.CANARY_WRITER)
    assert "postgres" not in registry.with_capability(registry.CANARY_WRITER)
