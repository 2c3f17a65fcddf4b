"""A client for sync jobs: read and move watermarks, record consumers and their reads.

    async with RepairClient(url, token=...) as repair:
        await repair.advance("orders", through, by="orders-sync", reason="hourly run")
        await repair.record_read("reports", "orders", [(start, end)])

It loads httpx and driftgauge's error tree only, as the ledger client does, so a sync job
that embeds both pays for no server stack.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from types import TracebackType
from typing import Any, TypedDict, Unpack

import httpx

from driftgauge.core.errors import DriftgaugeError


class RepairClientError(DriftgaugeError):
    """The repair API refused a request or could not be reached; the message says which."""


class WatermarkOptions(TypedDict, total=False):
    """What an advance may also set: the check over the pipeline's output, the stall limit."""

    check: str | None
    stall_after_seconds: float | None


class ConsumerReach(TypedDict, total=False):
    """How a consumer is re-triggered (a webhook or a command), and who signs its numbers."""

    webhook_url: str | None
    command: str | None
    signs: bool
    signed_by: str | None


# What the API is sent for an option not given: the body names every field.
_NO_OPTIONS: WatermarkOptions = {"check": None, "stall_after_seconds": None}
_NO_REACH: ConsumerReach = {"webhook_url": None, "command": None, "signs": False, "signed_by": None}


class RepairClient:
    """Watermarks, consumers and the read log of driftgauge's repair API (async)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/api/v1",
            headers=headers,
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> RepairClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._http.aclose()

    async def watermark(self, pipeline: str) -> dict[str, Any]:
        """Return a pipeline's watermark and its latest moves."""
        return await self._call("GET", f"/watermarks/{pipeline}", None, "read the watermark")

    async def advance(
        self, pipeline: str, to: datetime, *, by: str, reason: str, **also: Unpack[WatermarkOptions]
    ) -> dict[str, Any]:
        """Move a pipeline's watermark forward (creating it on first use)."""
        body = {"to": to.isoformat(), "by": by, "reason": reason, **_NO_OPTIONS, **also}
        return await self._call(
            "POST", f"/watermarks/{pipeline}/advance", body, "advance the watermark"
        )

    async def move_back(
        self, pipeline: str, to: datetime, *, by: str, reason: str
    ) -> dict[str, Any]:
        """Move a pipeline's watermark back (a breach unless a backfill of it is open)."""
        body = {"to": to.isoformat(), "by": by, "reason": reason}
        return await self._call(
            "POST", f"/watermarks/{pipeline}/move-back", body, "move the watermark back"
        )

    async def put_consumer(
        self, name: str, *, kind: str, owner: str, rank: int, **reach: Unpack[ConsumerReach]
    ) -> dict[str, Any]:
        """Create or replace a consumer."""
        body = {"kind": kind, "owner": owner, "rank": rank, **_NO_REACH, **reach}
        return await self._call("PUT", f"/consumers/{name}", body, "write the consumer")

    async def consumers(self) -> list[dict[str, Any]]:
        """Return every consumer in replay order."""
        answer: list[dict[str, Any]] = await self._json("GET", "/consumers", None, "read consumers")
        return answer

    async def record_read(
        self,
        consumer: str,
        check: str,
        partitions: Iterable[tuple[datetime, datetime]],
        *,
        read_at: datetime | None = None,
    ) -> int:
        """Log that a consumer read these [start, end) partitions of a check."""
        body = {
            "consumer": consumer,
            "check": check,
            "partitions": [
                {"start": lo.isoformat(), "end": hi.isoformat()} for lo, hi in partitions
            ],
            "read_at": read_at.isoformat() if read_at else None,
        }
        return int((await self._call("POST", "/reads", body, "record the read"))["recorded"])

    async def _call(
        self, method: str, path: str, body: dict[str, Any] | None, what: str
    ) -> dict[str, Any]:
        answer: dict[str, Any] = await self._json(method, path, body, what)
        return answer

    async def _json(self, method: str, path: str, body: dict[str, Any] | None, what: str) -> Any:
        """Return the JSON the API answers; raise RepairClientError naming `what` and why."""
        try:
            resp = await self._http.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise RepairClientError(f"{what}: driftgauge cannot be reached ({exc!r})") from None
        if resp.status_code >= 400:
            raise RepairClientError(f"{what}: HTTP {resp.status_code}: {_detail(resp)}")
        return resp.json()


def _detail(resp: httpx.Response) -> Any:
    """Return the error body's `detail` (a refused step names its rule there), or its text."""
    try:
        return resp.json().get("detail")
    except ValueError:
        return resp.text[:300]
