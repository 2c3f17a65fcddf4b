"""The exporter election on the real state database: one leader, taken over when it goes."""

from __future__ import annotations

import asyncpg
import pytest

from driftgauge.config.frozen import Config
from driftgauge.core.errors import StateError
from driftgauge.state.election import ExporterElection
from driftgauge.state.store import StateStore

from .service_helpers import make_config, schema_name
from .state_helpers import stores_fixture

pytestmark = pytest.mark.integration


@pytest.fixture
async def config(pg_database: str) -> Config:
    return make_config(pg_database, schema_name())


stores = stores_fixture(3)


async def test_one_of_three_leads_and_another_takes_over_when_it_shuts_down(
    stores: list[StateStore],
) -> None:
    elections = [s.exporter_election() for s in stores]
    try:
        assert [await e.attempt() for e in elections] == [True, False, False]
        # Asking again changes nothing: the lock stays with its holder.
        assert [await e.attempt() for e in elections] == [True, False, False]
        await elections[0].release()
        assert not elections[0].leader
        assert [await e.attempt() for e in elections[1:]] == [True, False]
    finally:
        for e in elections:
            await e.release()


async def test_a_leader_whose_connection_dies_loses_the_lock_to_another(
    stores: list[StateStore], config: Config
) -> None:
    first, second = stores[0].exporter_election(), stores[1].exporter_election()
    try:
        assert await first.attempt()
        assert not await second.attempt()
        # What a kill -9 leaves: the server ends the dead replica's session.
        conn = await asyncpg.connect(config.state.dsn.reveal(), timeout=10)
        try:
            ended = await conn.fetchval(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'driftgauge-exporter' AND pid IN"
                " (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)) t"
            )
        finally:
            await conn.close()
        assert ended >= 1
        assert await second.attempt()
        # The old leader learns it lost the lock at its next attempt, then asks again.
        with pytest.raises(StateError, match="exporter lock"):
            await first.attempt()
        assert not await first.attempt()
    finally:
        await first.release()
        await second.release()


async def test_a_single_replica_is_always_the_exporter(stores: list[StateStore]) -> None:
    only = stores[0].exporter_election()
    try:
        assert await only.attempt()
        assert await only.attempt()
    finally:
        await only.release()


async def test_an_unreachable_state_database_keeps_the_last_role() -> None:
    lost = ExporterElection("postgresql://postgres@127.0.0.1:1/postgres", 42, timeout=2)
    lost.leader = True
    with pytest.raises(StateError, match="state database: hold the exporter lock"):
        await lost.attempt()
    assert lost.leader
