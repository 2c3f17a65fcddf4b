"""Replicas on the real state database: their state stores and tick runners."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import pytest

from driftgauge.config.frozen import Config, State
from driftgauge.jobs.adapters import AdapterPool
from driftgauge.jobs.ticks import TickRunner
from driftgauge.state.store import StateStore
from driftgauge.stores.memory import MemoryAdapter

from .service_helpers import memory_opener


@asynccontextmanager
async def replica_stores(state: State, n: int) -> AsyncIterator[list[StateStore]]:
    """Yield the state stores of replicas replica-0 .. replica-{n-1}; close them after."""
    opened = [await StateStore.open(state, replica=f"replica-{i}") for i in range(n)]
    try:
        yield opened
    finally:
        for s in opened:
            await s.close()


def stores_fixture(n: int) -> Any:
    """Return a `stores` fixture: the state stores of n replicas on the test's `config`."""

    @pytest.fixture
    async def stores(config: Config) -> AsyncIterator[list[StateStore]]:
        async with replica_stores(config.state, n) as opened:
            yield opened

    return stores


def memory_runner(
    config: Config,
    store: StateStore,
    adapters: dict[tuple[str, str], MemoryAdapter],
    clock: Callable[[], datetime],
    **options: Any,
) -> TickRunner:
    """Return a tick runner of every check of `config`, reading the in-memory `adapters`."""
    pool = AdapterPool(config.checks, memory_opener(adapters))
    return TickRunner(config.checks, store, pool, clock=clock, **options)
