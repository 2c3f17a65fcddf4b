"""Every kind that can describe its fields names a field it cannot read, before counting.

The end-to-end refusals (CLI exit codes, recorded runs, OpenSearch mapping cases) are in
tests/integration/test_preflight.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from driftgauge.stores.preflight import FieldSchema, Inspectable
from tests.conformance.items import ITEMS, SPEC
from tests.conformance.spec import COMPOSITE_KEYS, DESCRIBES_FIELDS, Kind, Spec, Store

pytestmark = pytest.mark.integration


async def _inspect(kind: Kind, stored: Store, spec: Spec) -> list[FieldSchema]:
    kind.require(DESCRIBES_FIELDS)
    adapter = await (await stored(kind, ITEMS)).open(spec)
    try:
        assert isinstance(adapter, Inspectable)
        return await adapter.inspect_fields()
    finally:
        await adapter.close()


async def test_every_field_of_the_data_set_is_readable(kind: Kind, stored: Store) -> None:
    described = await _inspect(kind, stored, SPEC)
    assert [fs.wanted.role for fs in described] == ["key", "time"] + [
        f"fields.{name}" for name in SPEC.fields
    ]
    assert [fs.problems for fs in described] == [()] * len(described)


@pytest.mark.parametrize("role", ["time", "fields.label"])
async def test_a_missing_field_is_named(kind: Kind, stored: Store, role: str) -> None:
    spec = (
        replace(SPEC, time="done_atx")
        if role == "time"
        else replace(SPEC, fields={**SPEC.fields, "label": ("tierx", "string")})
    )
    described = {fs.wanted.role: fs for fs in await _inspect(kind, stored, spec)}
    missing = described.pop(role)
    assert missing.problems and missing.wanted.column in missing.problems[0], missing
    assert all(not fs.problems for fs in described.values())


async def test_a_missing_key_part_is_named(kind: Kind, stored: Store) -> None:
    kind.require(COMPOSITE_KEYS)
    spec = replace(SPEC, key=("id", "tierx"), key_type=("string", "string"))
    described = {fs.wanted.role: fs for fs in await _inspect(kind, stored, spec)}
    assert list(described)[:3] == ["key.id", "key.tierx", "time"]
    missing = described.pop("key.tierx")
    assert missing.problems and "tierx" in missing.problems[0], missing
    assert all(not fs.problems for fs in described.values())
