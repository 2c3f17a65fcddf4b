"""Consumers: downstream reports, exports and models, their owners, ranks and re-triggers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from driftgauge.pg.calls import PgCalls
from driftgauge.repair.errors import NotFound, RepairInputError
from driftgauge.repair.models import ConsumerIn, ConsumerOut


def consumer_row(r: Any) -> ConsumerOut:
    """Return a consumers row as the API shows it: every column, in the table's order."""
    return ConsumerOut.model_validate(dict(r))


class Consumers:
    """The consumers table."""

    def __init__(self, calls: PgCalls, clock: Callable[[], datetime]) -> None:
        self.calls = calls
        self.clock = clock

    async def put(self, name: str, consumer: ConsumerIn) -> ConsumerOut:
        """Create or replace one consumer."""
        # Kind and rank are checked by ConsumerIn; these rules span two fields.
        if not (consumer.webhook_url or consumer.command):
            raise RepairInputError(
                "webhook_url", "a consumer needs a webhook_url or a command to be re-triggered"
            )
        if consumer.signs and not consumer.signed_by:
            raise RepairInputError(
                "signed_by", "a consumer that signs its numbers names who signs them"
            )
        now = self.clock()
        rec = await self.calls.fetchrow(
            "write a consumer",
            "INSERT INTO consumers (name, kind, owner, rank, webhook_url, command, signs,"
            " signed_by, created_at, updated_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)"
            " ON CONFLICT (name) DO UPDATE SET kind = EXCLUDED.kind,"
            " owner = EXCLUDED.owner, rank = EXCLUDED.rank,"
            " webhook_url = EXCLUDED.webhook_url, command = EXCLUDED.command,"
            " signs = EXCLUDED.signs, signed_by = EXCLUDED.signed_by,"
            " updated_at = EXCLUDED.updated_at RETURNING *",
            name,
            consumer.kind,
            consumer.owner,
            consumer.rank,
            consumer.webhook_url,
            consumer.command,
            consumer.signs,
            consumer.signed_by,
            now,
        )
        return consumer_row(rec)

    async def list(self) -> list[ConsumerOut]:
        """Return every consumer in replay order (rank, then name)."""
        recs = await self.calls.fetch(
            "read consumers", "SELECT * FROM consumers ORDER BY rank, name"
        )
        return [consumer_row(r) for r in recs]

    async def get(self, name: str) -> ConsumerOut:
        """Return one consumer."""
        rec = await self.calls.fetchrow(
            "read a consumer", "SELECT * FROM consumers WHERE name = $1", name
        )
        if rec is None:
            raise NotFound(f"no consumer named {name!r}")
        return consumer_row(rec)

    async def delete(self, name: str) -> None:
        """Remove a consumer and its read log."""
        done = await self.calls.execute(
            "delete a consumer", "DELETE FROM consumers WHERE name = $1", name
        )
        if done.endswith(" 0"):
            raise NotFound(f"no consumer named {name!r}")
