"""The service app served in-process: its lifespan run, a client on it, a run through it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI


@asynccontextmanager
async def app_client(
    app: FastAPI, base_url: str = "http://driftgauge"
) -> AsyncIterator[httpx.AsyncClient]:
    """Run the app's lifespan and yield a client that talks to it without a socket."""
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=base_url, timeout=30
        ) as client,
    ):
        yield client


async def finished_run(
    client: httpx.AsyncClient, check: str, headers: Mapping[str, str]
) -> dict[str, Any]:
    """Start a run of `check` through the API (with `headers`); return it once it has ended."""
    resp = await client.post(f"/api/v1/checks/{check}/runs", headers=headers)
    assert resp.status_code == 202, resp.text
    # The run's own page is read as the public reader would, without the headers.
    for _ in range(200):
        run: dict[str, Any] = (await client.get(resp.json()["run"])).json()
        if run["status"] != "running":
            break
        await asyncio.sleep(0.05)
    return run
