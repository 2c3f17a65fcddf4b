"""The service app served to an HTTP client in-process, on the real state database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import httpx
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from driftgauge.app.service import create_app
from driftgauge.config.frozen import Config
from driftgauge.stores.memory import MemoryAdapter

from .service_helpers import TOKEN, memory_opener

AUTH = {"Authorization": f"Bearer {TOKEN}"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def memory_app(
    config: Config,
    adapters: dict[tuple[str, str], MemoryAdapter],
    clock: Callable[[], datetime],
    **options: Any,
) -> FastAPI:
    """Return the app with no scheduler, reading the in-memory `adapters` for its stores."""
    return create_app(
        config, start_scheduler=False, opener=memory_opener(adapters), clock=clock, **options
    )


@asynccontextmanager
async def serving(
    app: FastAPI, base_url: str = "http://driftgauge"
) -> AsyncIterator[httpx.AsyncClient]:
    """Yield a client of `app` with its lifespan running, as a server would start it."""
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=base_url, timeout=30
        ) as client,
    ):
        yield client


async def finished_run(client: httpx.AsyncClient, window: str) -> dict[str, Any]:
    """Run `reviews` over `window` through the API and return the run once it completed."""
    for _ in range(100):
        # The previous run's tick may still be refreshing the snapshot: 409 until it ends.
        resp = await client.post(
            "/api/v1/checks/reviews/runs", params={"window": window}, headers=AUTH
        )
        if resp.status_code != 409:
            break
        await asyncio.sleep(0.05)
    assert resp.status_code == 202, resp.text
    run = await ended(client, resp.json()["run"])
    assert run["complete"], run
    return run


async def ended(
    client: httpx.AsyncClient, url: str, polls: int = 400, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """Read the run at `url` every 50 ms until it is no longer running, and return it."""
    for _ in range(polls):
        run: dict[str, Any] = (await client.get(url, headers=headers)).json()
        if run["status"] != "running":
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {url} did not finish")


async def posted(client: httpx.AsyncClient, path: str, body: Any, status: int = 200) -> Any:
    """POST `body` to `path` with the token, assert the answer's status and return its JSON."""
    resp = await client.post(path, headers=AUTH, json=body)
    assert resp.status_code == status, resp.text
    return resp.json()


def samples(exposition: str) -> Samples:
    """Return every sample of a /metrics text by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(exposition)
        for s in fam.samples
    }
