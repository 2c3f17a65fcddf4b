"""The repair client raises its own error, naming the request, the status and the rule."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest

from driftgauge.ledger.client import LedgerClientError
from driftgauge.repair.client import RepairClient, RepairClientError

T0 = datetime(2026, 3, 15, tzinfo=UTC)


def test_a_refused_move_raises_repair_client_error_naming_the_rule() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/watermarks/orders/advance"
        return httpx.Response(409, json={"detail": {"step": "advance", "rule": "backwards"}})

    async def go() -> None:
        async with RepairClient("http://dg", transport=httpx.MockTransport(refuse)) as repair:
            await repair.advance("orders", T0, by="sync", reason="hourly")

    with pytest.raises(RepairClientError, match=r"advance the watermark: HTTP 409: .*backwards"):
        asyncio.run(go())
    assert not issubclass(RepairClientError, LedgerClientError)


def test_an_unreachable_api_and_a_refused_list_name_the_request() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def forbidden(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"detail": "a read token is required"})

    async def read(transport: httpx.MockTransport) -> None:
        async with RepairClient("http://dg", transport=transport) as repair:
            await repair.watermark("orders")

    async def consumers() -> None:
        async with RepairClient("http://dg", transport=httpx.MockTransport(forbidden)) as repair:
            await repair.consumers()

    with pytest.raises(RepairClientError, match="read the watermark: driftgauge cannot be reached"):
        asyncio.run(read(httpx.MockTransport(down)))
    with pytest.raises(RepairClientError, match="read consumers: HTTP 403: a read token"):
        asyncio.run(consumers())
