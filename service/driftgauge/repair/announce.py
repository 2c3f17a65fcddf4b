"""Render a backfill's announcement from the consumers rows and deliver it to their webhooks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from driftgauge.repair.models import BackfillOut
from driftgauge.repair.partitions import describe

WEBHOOK_TIMEOUT = 10.0


def direction(before: Mapping[str, Any], expected: Mapping[str, Any]) -> str:
    """Return how the count is expected to move: from the reader's before to the source."""
    delta = int(expected["count"]) - int(before["count"])
    if delta == 0:
        return "the row count stays the same; contents change"
    return f"the row count goes {'up' if delta > 0 else 'down'} by {abs(delta)}"


def render(
    backfill: BackfillOut,
    before: Mapping[str, Any],
    expected: Mapping[str, Any],
    runs_at: datetime | None,
) -> str:
    """Return the announcement text: who is told, the old totals, the direction, the time."""
    parts = backfill.partitions
    lines = [
        f"Backfill {backfill.id} of {backfill.check}: {len(parts)} partition(s) from "
        f"{parts[0][0].isoformat()} to {parts[-1][1].isoformat()} will be recomputed"
        + (f" at {runs_at.isoformat()}." if runs_at else " once this announcement is out."),
        f"Reason: {backfill.reason}",
        f"Before (what you read): {describe(before)}.",
        f"Expected after: {describe(expected)}; {direction(before, expected)}.",
        "Consumers, in replay order:",
    ]
    for c in backfill.consumers:
        signed = f"; signed by {c.signed_by}" if c.signs else ""
        lines.append(f"  rank {c.rank}: {c.name} ({c.kind}, owner {c.owner}{signed})")
    return "\n".join(lines)


@dataclass
class Delivery:
    """One webhook post of the announcement or a replay: delivered or why not."""

    consumer: str
    delivered: bool
    detail: str


async def post(url: str, body: Mapping[str, Any], consumer: str) -> Delivery:
    """POST `body` as JSON to a consumer's webhook; any 2xx is delivered."""
    try:
        async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT) as client:
            resp = await client.post(url, json=body)
    except httpx.HTTPError as exc:
        return Delivery(consumer, False, f"{url}: {type(exc).__name__}: {exc}")
    ok = 200 <= resp.status_code < 300
    return Delivery(consumer, ok, f"{url}: HTTP {resp.status_code}")
