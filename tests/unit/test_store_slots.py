"""Per-store query slots: at most K queries at once on a store, served in arrival order."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from driftgauge import observe
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError
from driftgauge.engine.reconcile import reconcile
from driftgauge.slots import store_slot
from driftgauge.stores.base import BucketDigest, Granularity
from driftgauge.stores.memory import MemoryAdapter
from tests.integration.service_helpers import day_rows

START = datetime(2026, 3, 1, tzinfo=UTC)
CONFIG = """
stores:
  src: {kind: postgres, dsn: "postgresql://unused@127.0.0.1:1/x"<LIMIT>}
  dst: {kind: opensearch, url: "http://127.0.0.1:1"}
state: {dsn: "postgresql://unused@127.0.0.1:1/x"}
checks:
"""
CHECK = """  c<N>:
    source: {store: src, table: t<N>, key: task_id, time: completed_at}
    reader: {store: dst, index: i<N>, key: task_id, time: completed_at}
    fields: {label: string}
"""


class InFlight:
    """Counts the calls in flight on one store, and the most seen at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0


class Slow(MemoryAdapter):
    """An in-memory side whose digest calls take a while, counted in flight."""

    def __init__(self, rows: list, flight: InFlight) -> None:  # type: ignore[type-arg]
        super().__init__(rows)
        self.flight = flight

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        self.flight.now += 1
        self.flight.most = max(self.flight.most, self.flight.now)
        try:
            await asyncio.sleep(0.02)
            return await super().bucket_digests(start, end, granularity)
        finally:
            self.flight.now -= 1


async def _run_checks(limit: str, n: int = 6) -> InFlight:
    text = CONFIG.replace("<LIMIT>", limit) + "".join(
        CHECK.replace("<N>", str(i)) for i in range(n)
    )
    config = load_text(text)
    rows = [r for d in range(3) for r in day_rows(START + timedelta(days=d), 5)]
    flight = InFlight()

    async def one(name: str) -> str:
        result = await reconcile(
            config.checks[name],
            Slow(rows, flight),
            MemoryAdapter(rows),
            START,
            START + timedelta(days=3),
            now=START + timedelta(days=10),
        )
        return result.status

    statuses = await asyncio.gather(*(one(name) for name in config.checks))
    assert set(statuses) == {"ok"}
    return flight


async def test_a_store_limit_caps_the_queries_in_flight_over_all_checks() -> None:
    unlimited = await _run_checks("")
    assert unlimited.most >= 4  # without a limit the six checks ask at once
    limited = await _run_checks(", max_concurrent_queries: 2")
    assert limited.most == 2
    waited = observe.SLOT_WAITS.snapshot()[("src",)]
    assert waited[0][-1] >= 6  # every source call took a slot, and was timed waiting
    assert observe.SLOT_WAITING.snapshot()[("src",)] == 0  # none left waiting


async def test_slots_are_served_in_arrival_order() -> None:
    order: list[int] = []
    release = asyncio.Event()

    async def holder() -> None:
        async with store_slot("fair", 1):
            await release.wait()

    async def waiter(i: int) -> None:
        async with store_slot("fair", 1):
            order.append(i)

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiters = []
    for i in range(5):
        waiters.append(asyncio.create_task(waiter(i)))
        await asyncio.sleep(0)  # each arrives after the one before
    release.set()
    await asyncio.gather(first, *waiters)
    assert order == [0, 1, 2, 3, 4]


async def test_an_unlimited_store_takes_no_slot() -> None:
    before = observe.SLOT_WAITS.snapshot().get(("free",))
    async with store_slot("free", None):
        pass
    assert observe.SLOT_WAITS.snapshot().get(("free",)) == before


def test_a_bad_limit_names_the_field() -> None:
    text = CONFIG.replace("<LIMIT>", ", max_concurrent_queries: 0") + CHECK.replace("<N>", "0")
    with pytest.raises(ConfigError) as err:
        load_text(text)
    assert any("stores.src.max_concurrent_queries" in p for p in err.value.problems)
