"""The REST API and /metrics over the real state database, with in-memory stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest

from driftgauge.stores.memory import MemoryAdapter

from .app_helpers import AUTH as AUTH  # test_peeled_day imports it from here
from .app_helpers import ended, memory_app, samples, serving
from .service_helpers import DAY0, NOW, make_config, schema_name
from .test_ticks import Stuck, sides

pytestmark = pytest.mark.integration
DAY = DAY0.date().isoformat()


@dataclass
class Api:
    client: httpx.AsyncClient
    truth: dict[str, set[str]]


def _clock() -> datetime:
    return NOW


async def _serve(
    dsn: str, adapters: dict[tuple[str, str], MemoryAdapter], *, public_read: bool = True
) -> AsyncIterator[httpx.AsyncClient]:
    config = make_config(dsn, schema_name(), public_read=public_read)
    async with serving(memory_app(config, adapters, _clock, refresh_every=3600)) as client:
        yield client


async def _run(client: httpx.AsyncClient, check: str) -> dict[str, Any]:
    resp = await client.post(f"/api/v1/checks/{check}/runs", headers=AUTH)
    assert resp.status_code == 202, resp.text
    return await ended(client, resp.json()["run"], polls=200)


@pytest.fixture(scope="module")
async def api(pg_database: str) -> AsyncIterator[Api]:
    adapters, truth = sides()
    async for client in _serve(pg_database, adapters):
        run = await _run(client, "reviews")
        assert run["status"] == "drift" and run["complete"]
        yield Api(client, truth)


async def test_health_and_readiness(api: Api) -> None:
    assert (await api.client.get("/healthz")).json() == {
        "status": "ok",
        "state": None,
        "scheduler": None,
    }
    ready = await api.client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "state": "ok", "scheduler": "disabled"}
    assert ready.headers["x-request-id"]


async def test_checks_list_their_latest_status(api: Api) -> None:
    body = (await api.client.get("/api/v1/checks")).json()
    by = {c["name"]: c for c in body["checks"]}
    assert by["reviews"]["status"] == "drift" and by["reviews"]["last_success_at"]
    assert by["orders"]["status"] is None and by["orders"]["last_run"] is None
    assert by["reviews"]["schedule"]["recent_every_seconds"] == 3600


async def test_checks_show_each_schedule_last_begun_and_next_due(api: Api) -> None:
    body = (await api.client.get("/api/v1/checks")).json()
    by = {c["name"]: {t["trigger"]: t for t in c["schedule"]["triggers"]} for c in body["checks"]}
    assert set(by["reviews"]) == {"recent", "full"} and set(by["orders"]) == {"recent"}
    orders = by["orders"]["recent"]
    # No run yet: nothing to count misses from, but its next time is known.
    assert orders["missed"] is None and orders["last_started_at"] is None
    assert orders["next_due_at"] is not None
    assert all(t["next_due_at"] for t in by["reviews"].values())
    assert all(isinstance(t["missed"], int) for t in by["reviews"].values())


async def test_checks_say_which_rows_of_a_window_they_read(api: Api) -> None:
    body = (await api.client.get("/api/v1/checks")).json()
    assert {c["coverage"] for c in body["checks"]} == {"every row of the window"}


async def test_checks_name_the_row_hash_both_sides_compute(api: Api) -> None:
    body = (await api.client.get("/api/v1/checks")).json()
    # PostgreSQL → OpenSearch: both compute lookup3, so `row_hash: auto` picks it.
    assert {c["row_hash"] for c in body["checks"]} == {"lookup3"}


async def test_walk_day_hour_prefix_keys_reaches_every_planted_key(api: Api) -> None:
    c = api.client
    days = (await c.get("/api/v1/checks/reviews/days")).json()["days"]
    assert [d["day"] for d in days] == ["2026-03-08", "2026-03-09", "2026-03-10"]
    first = days[0]
    assert (first["missing"], first["extra"], first["mismatched"]) == (2, 1, 1)
    assert first["status"] == "drift" and days[2]["status"] == "settling"
    assert len(first["source"]["digest"]) == 16

    day = (await c.get(f"/api/v1/checks/reviews/days/{DAY}")).json()
    differing = [h for h in day["hours"] if h["differs"]]
    assert differing and day["bucket"]["run_id"] == first["run_id"]
    found: set[str] = set()
    for h in differing:
        hour = datetime.fromisoformat(h["label"]).hour
        stored = (await c.get(f"/api/v1/checks/reviews/days/{DAY}/hours/{hour}")).json()
        assert stored["node"]["label"] == h["label"] and stored["differs"]
        live = (
            await c.get(
                f"/api/v1/checks/reviews/days/{DAY}/hours/{hour}",
                params={"live": "true"},
                headers=AUTH,
            )
        ).json()
        bad = [p["label"] for p in live["prefixes"] if p["differs"]]
        assert live["live"] and bad
        for prefix in bad:
            keys = (
                await c.get(
                    f"/api/v1/checks/reviews/days/{DAY}/keys",
                    params={"hour": hour, "prefix": prefix},
                    headers=AUTH,
                )
            ).json()
            assert keys["total"] >= 1
            found |= {k["key"] for k in keys["keys"]}
    planted = {k for keys in api.truth.values() for k in keys if "0308" in k or "03-08" in k}
    assert found == planted


async def test_keys_page_and_filter_by_kind(api: Api) -> None:
    url = f"/api/v1/checks/reviews/days/{DAY}/keys"
    missing = (
        await api.client.get(url, params={"kind": "missing", "page_size": 1}, headers=AUTH)
    ).json()
    page2 = (
        await api.client.get(
            url, params={"kind": "missing", "page_size": 1, "page": 2}, headers=AUTH
        )
    ).json()
    assert missing["total"] == 2 and len(missing["keys"]) == 1
    assert {missing["keys"][0]["key"], page2["keys"][0]["key"]} <= api.truth["missing"]
    assert missing["keys"][0]["key"] != page2["keys"][0]["key"]


async def test_keys_and_runs_page_by_limit_and_offset(api: Api) -> None:
    url = f"/api/v1/checks/reviews/days/{DAY}/keys"
    pages = [
        (await api.client.get(url, params={"limit": 1, "offset": i}, headers=AUTH)).json()
        for i in range(3)
    ]
    assert [(p["limit"], p["offset"], p["total"]) for p in pages] == [(1, i, 4) for i in range(3)]
    keys = [k["key"] for p in pages for k in p["keys"]]
    assert len(set(keys)) == 3
    whole = (await api.client.get(url, params={"limit": 3}, headers=AUTH)).json()
    assert [k["key"] for k in whole["keys"]] == keys
    old = (await api.client.get(url, params={"page_size": 1, "page": 3}, headers=AUTH)).json()
    assert old["keys"] == pages[2]["keys"] and old["offset"] == 2
    both = await api.client.get(url, params={"page": 2, "offset": 1}, headers=AUTH)
    assert both.status_code == 422 and "page" in both.text
    runs = "/api/v1/checks/reviews/runs"
    newest = (await api.client.get(runs, params={"limit": 1})).json()["runs"]
    skipped = (await api.client.get(runs, params={"limit": 1, "offset": 1})).json()["runs"]
    assert (
        newest
        and [r["id"] for r in skipped]
        == [r["id"] for r in (await api.client.get(runs, params={"limit": 2})).json()["runs"]][1:]
    )


async def test_keys_and_writes_need_a_valid_token(api: Api) -> None:
    url = f"/api/v1/checks/reviews/days/{DAY}/keys"
    assert (await api.client.get(url)).status_code == 401
    wrong = await api.client.get(url, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert (await api.client.post("/api/v1/checks/reviews/runs")).status_code == 401


@pytest.mark.parametrize(
    ("path", "params", "code", "names"),
    [
        ("/api/v1/checks/nope/days", {}, 404, "'nope'"),
        ("/api/v1/checks/reviews/days/2026-13-01", {}, 422, "day"),
        ("/api/v1/checks/reviews/days/0001-01-01", {}, 422, "day"),
        ("/api/v1/checks/reviews/days/2026-03-08/hours/24", {}, 422, "hour"),
        (
            "/api/v1/checks/reviews/days/2026-03-08/hours/3",
            {"live": "true", "prefix": "xyz"},
            422,
            "prefix",
        ),
        (
            "/api/v1/checks/reviews/days",
            {"since": "2026-03-09", "until": "2026-03-01"},
            422,
            "since",
        ),
        ("/api/v1/checks/reviews/days/2027-01-01", {}, 404, "2027-01-01"),
        ("/api/v1/checks/reviews/runs/999999", {}, 404, "run_id"),
    ],
)
async def test_bad_requests_name_the_parameter(
    api: Api, path: str, params: dict[str, str], code: int, names: str
) -> None:
    resp = await api.client.get(path, params=params, headers=AUTH)
    assert resp.status_code == code
    assert names in resp.text


async def test_metrics_show_the_stored_run(api: Api) -> None:
    text = (await api.client.get("/metrics")).text
    got = samples(text)
    key = (("check", "reviews"), ("day", DAY), ("kind", "missing"))
    assert got[("driftgauge_bucket_rows", key)] == 2
    assert got[("driftgauge_check_up", (("check", "reviews"),))] == 1
    assert ("driftgauge_check_up", (("check", "orders"),)) not in got


async def test_private_reads_need_a_token(pg_database: str) -> None:
    adapters, _ = sides()
    async for client in _serve(pg_database, adapters, public_read=False):
        assert (await client.get("/api/v1/checks")).status_code == 401
        assert (await client.get("/api/v1/checks", headers=AUTH)).status_code == 200
        assert (await client.get("/healthz")).status_code == 200


async def test_a_second_trigger_is_refused_and_shutdown_fails_the_running_check(
    pg_database: str,
) -> None:
    adapters, _ = sides()
    adapters[("dst", "orders")] = Stuck([])
    async for client in _serve(pg_database, adapters):
        first = await client.post("/api/v1/checks/orders/runs", headers=AUTH)
        again = await client.post("/api/v1/checks/orders/runs", headers=AUTH)
        assert first.status_code == 202 and again.status_code == 409
        assert "already running" in again.json()["detail"]
        url = first.json()["run"]
        assert (await client.get(url)).json()["status"] == "running"


async def test_an_interrupted_run_is_recorded_as_failed(pg_database: str) -> None:
    adapters, _ = sides()
    adapters[("dst", "orders")] = Stuck([])
    config = make_config(pg_database, schema_name())
    async with serving(memory_app(config, adapters, _clock), "http://d") as client:
        run_id = (await client.post("/api/v1/checks/orders/runs", headers=AUTH)).json()["run_id"]
    # A second app on the same state schema: the service restarted.
    async with serving(memory_app(config, adapters, _clock), "http://d") as client:
        run = (await client.get(f"/api/v1/checks/orders/runs/{run_id}")).json()
    assert run["status"] == "error" and not run["complete"]
    assert run["error"] == "interrupted: the service shut down mid-run"
