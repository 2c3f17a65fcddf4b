"""The `kind` every conformance test runs once per, and the data sets each kind holds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.conformance.kinds import KINDS
from tests.conformance.spec import Kind, Source, Store, Table


@pytest.fixture(scope="session", params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    """Yield each kind of the kinds table in turn; skip one whose engine is not configured."""
    missing = getattr(request.param.fixtures, "missing", None)
    if missing:
        pytest.skip(f"{request.param.name} lacks the capability: a configured engine ({missing})")
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
async def stored() -> AsyncIterator[Store]:
    """Yield a function storing a table in a kind once per session; all dropped at the end."""
    held: dict[tuple[str, str], Source] = {}

    async def store(kind: Kind, table: Table) -> Source:
        if (kind.name, table.name) not in held:
            held[kind.name, table.name] = await kind.fixtures.load(table)
        return held[kind.name, table.name]

    try:
        yield store
    finally:
        for source in held.values():
            await source.drop()
