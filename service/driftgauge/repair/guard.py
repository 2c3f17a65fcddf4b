"""Silent change of a signed partition: what a signing consumer read changed, unannounced."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from driftgauge.core.errors import StoreError
from driftgauge.repair import breaches, partitions
from driftgauge.repair.parts import CheckParts

log = logging.getLogger("driftgauge.repair")
LOOKBACK = timedelta(days=7)
"""Partitions ending this recently are digested again on every judgement (a check's
recent window, by default)."""

# The latest read of each partition by each signing consumer, with what it held then.
_SIGNED_READS = (
    "SELECT DISTINCT ON (r.consumer, r.check_name, r.partition_start) r.consumer,"
    " r.check_name, r.partition_start, r.partition_end, r.seen, r.read_at, c.signed_by"
    " FROM consumer_reads r JOIN consumers c ON c.name = r.consumer AND c.signs"
    " WHERE r.partition_end > $1"
    " ORDER BY r.consumer, r.check_name, r.partition_start, r.read_at DESC, r.id DESC"
)
# Partitions of an announced backfill that is not closed yet: their change was announced.
_ANNOUNCED = (
    "SELECT b.check_name, t.partition_start FROM backfills b JOIN backfill_targets t"
    " ON t.backfill_id = b.id WHERE b.announced_at IS NOT NULL AND b.status <> 'closed'"
)


def subject(check: str, consumer: str, start: datetime) -> str:
    """Return a silent-change breach's subject: check, consumer, partition."""
    return f"{check}/{consumer}/{start.isoformat()}"


class SilentChangeGuard(CheckParts):
    """Digest every signed partition again and raise `silent_change` where it moved."""

    async def judge(self) -> list[str]:
        """Judge every signed partition now; return the subjects of the silent changes found."""
        now = self.clock()
        async with self.calls.conn("read signed partitions") as conn:
            reads = [
                r for r in await conn.fetch(_SIGNED_READS, now - LOOKBACK) if r["seen"] is not None
            ]
            covered = {
                (r["check_name"], r["partition_start"]) for r in await conn.fetch(_ANNOUNCED)
            }
        by_check: dict[str, list[Any]] = {}
        for r in reads:
            by_check.setdefault(r["check_name"], []).append(r)
        found: list[str] = []
        for check in sorted(self.checks):
            rows = by_check.get(check, [])
            try:
                reader = (await self.sides(check))[1]
                parts = sorted({(r["partition_start"], r["partition_end"]) for r in rows})
                current = await partitions.capture(reader, parts) if parts else {}
            except StoreError as exc:
                # A store we cannot read judges nothing: its breaches stay as they were.
                log.warning(
                    "could not digest signed partitions", extra={"check": check, "error": str(exc)}
                )
                continue
            holding: list[str] = []
            async with self.calls.transaction("judge silent changes") as conn:
                for r in rows:
                    seen = json.loads(r["seen"])
                    now_holds = current[r["partition_start"]]
                    start = r["partition_start"]
                    if partitions.same(seen, now_holds) or (check, start) in covered:
                        continue
                    name = subject(check, r["consumer"], start)
                    holding.append(name)
                    facts = {
                        "check": check,
                        "consumer": r["consumer"],
                        "signed_by": r["signed_by"],
                        "start": start.isoformat(),
                        "end": r["partition_end"].isoformat(),
                        "read_at": r["read_at"].isoformat(),
                        "before": seen,
                        "after": now_holds,
                    }
                    await breaches.record(
                        conn,
                        "silent_change",
                        name,
                        f"partition {start.isoformat()} of {check}, read by {r['consumer']} "
                        f"(signed by {r['signed_by']}) at {r['read_at'].isoformat()}, changed "
                        f"outside an announced backfill: before {partitions.describe(seen)},"
                        f" after {partitions.describe(now_holds)}",
                        facts,
                        now,
                    )
                await breaches.resolve_others(
                    conn, "silent_change", holding, now, prefix=f"{check}/"
                )
            found += holding
        return found
