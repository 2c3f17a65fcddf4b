"""The read log: which consumer read which partitions of a check, when, and what they held."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from driftgauge.core.paging import Page
from driftgauge.pg.calls import PgCalls
from driftgauge.repair.errors import NotFound, RepairInputError
from driftgauge.repair.models import ReadOut
from driftgauge.repair.partitions import Partition, Snapshot
from driftgauge.repair.parts import fetch_page

Capture = Callable[[str, Sequence[Partition]], Awaitable[dict[datetime, Snapshot] | None]]
"""Return what each partition of a check holds now, or None when it cannot be seen."""


class ReadLog:
    """Record and list consumer reads."""

    def __init__(
        self, calls: PgCalls, clock: Callable[[], datetime], capture: Capture, checks: Sequence[str]
    ) -> None:
        self.calls = calls
        self.clock = clock
        self.capture = capture
        self.checks = set(checks)

    async def record(
        self,
        consumer: str,
        check: str,
        partitions: Sequence[Partition],
        *,
        read_at: datetime | None = None,
        backfill_id: int | None = None,
        conn: Any = None,
    ) -> int:
        """Log that `consumer` read `partitions` of `check`; return the rows written.

        What each partition holds now is stored with the read: the silent-change baseline.
        """
        if check not in self.checks:
            raise RepairInputError("check", f"no such check {check!r}")
        if not partitions:
            raise RepairInputError("partitions", "name at least one partition")
        for i, (lo, hi) in enumerate(partitions):
            if hi <= lo:
                raise RepairInputError(f"partitions.{i}.end", "must be after start")
        seen = await self.capture(check, partitions)
        when = read_at or self.clock()
        rows = [
            (
                consumer,
                check,
                lo,
                hi,
                when,
                json.dumps(seen[lo]) if seen is not None and lo in seen else None,
                backfill_id,
            )
            for lo, hi in partitions
        ]
        if conn is not None:
            await self._insert(conn, rows)
        else:
            async with self.calls.transaction("record a read") as c:
                await self._insert(c, rows)
        return len(rows)

    async def _insert(self, conn: Any, rows: list[tuple[Any, ...]]) -> None:
        if await conn.fetchval("SELECT 1 FROM consumers WHERE name = $1", rows[0][0]) is None:
            raise NotFound(f"no consumer named {rows[0][0]!r}")
        await conn.executemany(
            "INSERT INTO consumer_reads (consumer, check_name, partition_start, partition_end,"
            " read_at, seen, backfill_id) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)",
            rows,
        )

    async def list(
        self,
        *,
        consumer: str | None = None,
        check: str | None = None,
        since: datetime | None = None,
        page: Page,
    ) -> list[ReadOut]:
        """Return logged reads, newest first."""
        recs = await fetch_page(
            self.calls,
            "read the read log",
            'SELECT consumer, check_name AS "check", partition_start AS "start",'
            ' partition_end AS "end", read_at, seen, backfill_id FROM consumer_reads'
            " WHERE ($1::text IS NULL OR consumer = $1) AND ($2::text IS NULL OR check_name = $2)"
            " AND ($3::timestamptz IS NULL OR partition_end > $3) ORDER BY read_at DESC, id DESC",
            page,
            consumer,
            check,
            since,
        )
        return [
            ReadOut.model_validate(
                {**dict(r), "seen": json.loads(r["seen"]) if r["seen"] is not None else None}
            )
            for r in recs
        ]
