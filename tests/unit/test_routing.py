"""A feature router mounted before its service runs answers 503 saying so, never 500."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from driftgauge.canary.router import canary_router
from driftgauge.ledger.router import ledger_router


def _allow() -> None:
    """Let every caller through."""


@pytest.mark.parametrize(
    ("router", "path", "detail"),
    [
        (canary_router, "/canary/reviews", "canaries are not running"),
        (ledger_router, "/ledger/runs/1", "the run ledger is not running"),
    ],
)
async def test_a_router_without_its_running_service_answers_503(
    router: object, path: str, detail: str
) -> None:
    app = FastAPI()
    app.include_router(router(_allow, _allow))  # type: ignore[operator]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        resp = await client.get(path)
    assert (resp.status_code, resp.json()) == (503, {"detail": detail})
