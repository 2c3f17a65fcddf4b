"""The kinds table holds every registered store kind, so none escapes the suite."""

from __future__ import annotations

from driftgauge.stores import registry
from tests.conformance.kinds import KINDS


def test_every_registered_kind_has_a_line_in_the_kinds_table() -> None:
    assert {k.name for k in KINDS if k.registered} == set(registry.kinds())
    assert len({k.name for k in KINDS}) == len(KINDS)


def test_a_registered_kind_takes_its_capabilities_from_the_registry() -> None:
    for kind in KINDS:
        if kind.registered:
            assert registry.kind_of(kind.name).capabilities <= kind.capabilities
