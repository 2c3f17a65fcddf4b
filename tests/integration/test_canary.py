"""Canary write/read-back on the real OpenSearch, keyed by a real PostgreSQL source row."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from opensearchpy import AsyncOpenSearch

from driftgauge.api.audit import audit_router
from driftgauge.api.auth import TokenCheck
from driftgauge.app.audit import open_audit
from driftgauge.canary.keys import adapter_key_picker
from driftgauge.canary.metrics import CanaryMetrics
from driftgauge.canary.probe import read_back_query, run_canary, sentinel_document, sentinel_id
from driftgauge.canary.service import key_picker_for
from driftgauge.canary.store import CanaryStore
from driftgauge.config.frozen import Api, Check, Config, State
from driftgauge.config.secrets import Secret
from driftgauge.configfile.loader import load_text
from driftgauge.stores import open_adapter
from driftgauge.stores.pools import StorePools
from tests.integration.signals_support import (
    SYNC_STORE,
    TIERS_NOT_CANARY,
    create_canary_index,
    insert_tasks,
    migrated_schema,
    registry_of,
    reviews_raw,
    state_pool,
)

pytestmark = pytest.mark.integration

NOW = datetime(2024, 5, 7, 12, 0, tzinfo=UTC)
YESTERDAY = datetime(2024, 5, 6, tzinfo=UTC)
KEYS = [f"task-{i:03d}" for i in range(20)]


def check_config(dsn: str, index: str, **canary: Any) -> Check:
    settings: dict[str, Any] = {
        "store": "search_sync",
        "document": {"review_tier": "first_tier"},
        "key_query": "SELECT task_id FROM tasks WHERE completed_at >= $1 AND completed_at < $2"
        " ORDER BY completed_at DESC LIMIT 1",
        "timeout_seconds": 20,
    }
    settings.update(canary)
    raw = reviews_raw(
        dsn,
        index,
        stores={"search_sync": SYNC_STORE},
        reader={"fields": {"label": "review_tier"}, "filter": TIERS_NOT_CANARY},
        canary=settings,
    )
    return load_text(yaml.safe_dump(raw)).checks["reviews"]


@dataclass
class Setup:
    dsn: str
    index: str
    client: AsyncOpenSearch


@pytest.fixture(scope="module")
async def setup(
    pg_database: str, os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> AsyncIterator[Setup]:
    await insert_tasks(
        pg_database, "first_tier", [(k, YESTERDAY + timedelta(hours=i)) for i, k in enumerate(KEYS)]
    )
    index = os_index("dg_canary")
    await create_canary_index(os_client, index, "review_tier")
    yield Setup(pg_database, index, os_client)


async def block(s: Setup, setting: str, on: bool) -> None:
    await s.client.indices.put_settings(index=s.index, body={setting: on if on else None})


async def test_a_healthy_canary_reads_its_sentinel_back_and_removes_it(setup: Setup) -> None:
    check = check_config(setup.dsn, setup.index)
    result = await run_canary(check, key_picker_for(check, open_adapter_for), now=NOW)
    assert (result.result, result.detail) == ("ok", "")
    assert result.key == KEYS[-1]  # the latest real key of the previous day
    assert not await setup.client.exists(index=setup.index, id=sentinel_id("reviews"))


async def open_adapter_for(check: Check) -> Any:
    return await open_adapter(check.source)


async def test_the_canary_writes_and_reads_through_the_stores_shared_clients(setup: Setup) -> None:
    check = check_config(setup.dsn, setup.index)
    assert check.canary is not None
    pools = StorePools()
    try:
        result = await run_canary(
            check, key_picker_for(check, open_adapter_for), now=NOW, connections=pools.connection
        )
        assert (result.result, result.detail) == ("ok", "")
        shared = await pools.connection(check.canary.store)
        # The canary left the shared client open for the store's other users.
        assert not await shared.exists(index=setup.index, id=sentinel_id("reviews"))
    finally:
        await pools.close()


async def test_the_sentinel_is_hidden_from_the_reader_filter_but_not_from_the_read_back(
    setup: Setup,
) -> None:
    check = check_config(setup.dsn, setup.index)
    assert check.canary is not None and check.reader.filter is not None
    doc = sentinel_document(check, check.canary, "task-007", "tok123", NOW)
    assert doc["task_id"] == "task-007" and doc["driftgauge_canary"] == "tok123"
    await setup.client.index(index=setup.index, id="sentinel-probe", body=doc, refresh=True)
    try:
        seen_by_reader = await setup.client.count(
            index=setup.index, body={"query": check.reader.filter}
        )
        read_back = await setup.client.count(
            index=setup.index,
            body={"query": read_back_query(check, check.canary, "task-007", "tok123")},
        )
        assert (seen_by_reader["count"], read_back["count"]) == (0, 1)
    finally:
        await setup.client.delete(index=setup.index, id="sentinel-probe", refresh=True)


@pytest.mark.parametrize("setting", ["index.blocks.write", "index.blocks.read_only"])
async def test_a_write_block_is_a_permission_failure(setup: Setup, setting: str) -> None:
    check = check_config(setup.dsn, setup.index)
    await block(setup, setting, True)
    try:
        result = await run_canary(check, key_picker_for(check, open_adapter_for), now=NOW)
    finally:
        await block(setup, setting, False)
    assert result.result == "permission"
    assert "HTTP 403 cluster_block_exception" in result.detail
    assert result.detail.startswith("write the sentinel as the sync job")


async def test_a_reader_filter_that_hides_the_sentinel_is_not_visible(setup: Setup) -> None:
    # The job writes a tier the reader's filter does not know: written, never visible.
    check = check_config(
        setup.dsn, setup.index, document={"review_tier": "third_tier"}, write="index"
    )
    result = await run_canary(check, key_picker_for(check, open_adapter_for), now=NOW)
    assert result.result == "not_visible"
    assert "does not return it" in result.detail
    assert not await setup.client.exists(index=setup.index, id=sentinel_id("reviews"))


async def test_no_source_row_and_a_deadline_are_named(setup: Setup) -> None:
    check = check_config(setup.dsn, setup.index)
    empty = await run_canary(
        check, key_picker_for(check, open_adapter_for), now=NOW + timedelta(days=5)
    )
    assert empty.result == "error" and "no row on 2024-05-11" in empty.detail
    slow = check_config(setup.dsn, setup.index, timeout_seconds=0.001)
    late = await run_canary(slow, key_picker_for(slow, open_adapter_for), now=NOW)
    assert (late.result, late.detail) == ("timeout", "no answer within 0.001s")


async def test_the_source_adapter_picks_a_real_key_too(setup: Setup) -> None:
    check = check_config(setup.dsn, setup.index, key_query=None)
    adapter = await open_adapter(check.source)
    try:
        result = await run_canary(check, adapter_key_picker(adapter), now=NOW)
    finally:
        await adapter.close()
    assert result.result == "ok" and result.key in KEYS


async def test_results_are_stored_and_exported(setup: Setup) -> None:
    check = check_config(setup.dsn, setup.index)
    async with state_pool(setup.dsn) as pool:
        store = CanaryStore(pool)
        ok = await run_canary(check, key_picker_for(check, open_adapter_for), now=NOW)
        await store.record(ok)
        await block(setup, "index.blocks.write", True)
        try:
            bad = await run_canary(
                check, key_picker_for(check, open_adapter_for), now=NOW + timedelta(hours=1)
            )
        finally:
            await block(setup, "index.blocks.write", False)
        await store.record(bad)
        part = CanaryMetrics(store, ["reviews"])
        await part.refresh()
        v = registry_of(part).get_sample_value
        assert v("driftgauge_canary_up", {"check": "reviews"}) == 0
        assert v("driftgauge_canary_duration_seconds", {"check": "reviews"}) == bad.duration
        assert (
            v("driftgauge_canary_last_success_timestamp_seconds", {"check": "reviews"})
            == (NOW + timedelta(seconds=ok.duration)).timestamp()
        )
        for result, n in [
            ("ok", 1),
            ("permission", 1),
            ("not_visible", 0),
            ("timeout", 0),
            ("error", 0),
        ]:
            assert v("driftgauge_canary_runs_total", {"check": "reviews", "result": result}) == n
        history = await store.history("reviews")
        assert [h.result for h in history] == ["permission", "ok"]
        assert history[0].key == KEYS[-1]


async def test_a_deploy_hook_runs_the_canary_through_the_api(setup: Setup) -> None:
    check = check_config(setup.dsn, setup.index)
    async with migrated_schema(setup.dsn) as schema:
        config = Config(
            stores={}, state=State(Secret(setup.dsn), schema), api=Api(), checks={"reviews": check}
        )

        async def no_reconcile(name: str, start: datetime, end: datetime) -> None:
            raise AssertionError("no ledger is configured")

        async with open_audit(
            config, reconcile=no_reconcile, source=open_adapter_for, clock=lambda: NOW
        ) as audit:
            app = FastAPI()
            app.include_router(audit_router(TokenCheck([b"t0k"], True)), prefix="/api/v1")
            app.state.audit = audit
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://dg"
            ) as http:
                denied = await http.post("/api/v1/canary/reviews")
                ran = await http.post(
                    "/api/v1/canary/reviews", headers={"Authorization": "Bearer t0k"}
                )
                unknown = await http.post(
                    "/api/v1/canary/orders", headers={"Authorization": "Bearer t0k"}
                )
                listed = (await http.get("/api/v1/canary/reviews")).json()
            v = registry_of(*audit.parts).get_sample_value
            assert v("driftgauge_canary_up", {"check": "reviews"}) == 1
    assert denied.status_code == 401
    assert ran.status_code == 200 and ran.json()["result"] == "ok"
    assert "key" not in ran.json()
    assert unknown.status_code == 404
    assert [r["result"] for r in listed] == ["ok"]
