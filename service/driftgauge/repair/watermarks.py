"""Watermarks: how far each pipeline has correctly processed; moves with who and why."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from driftgauge.pg.calls import PgCalls
from driftgauge.repair import breaches
from driftgauge.repair.errors import NotFound, RepairInputError
from driftgauge.repair.models import WatermarkMove, WatermarkMoveOut, WatermarkOut, WatermarkShown

OPEN_STATUSES = ("announced", "running", "verified", "replayed")
"""A backfill in one of these may move its pipeline's watermark back without a breach."""


# A move's columns under the names a watermark shows them by.
_MOVES = (
    'SELECT moved_at, from_ts AS "from", to_ts AS "to", direction, moved_by AS "by", reason,'
    " backfill_id FROM watermark_moves WHERE pipeline = $1"
    " ORDER BY moved_at DESC, id DESC LIMIT 50"
)


def _row(r: Any) -> WatermarkOut:
    stall = r["stall_after"]
    return WatermarkOut(
        pipeline=r["pipeline"],
        processed_through=r["processed_through"],
        check=r["check_name"],
        stall_after_seconds=stall.total_seconds() if stall is not None else None,
        advanced_at=r["advanced_at"],
        updated_at=r["updated_at"],
        updated_by=r["updated_by"],
        reason=r["reason"],
    )


class Watermarks:
    """Read and move pipeline watermarks; a move back outside a backfill is a breach."""

    def __init__(self, calls: PgCalls, clock: Callable[[], datetime]) -> None:
        self.calls = calls
        self.clock = clock

    async def all(self) -> list[WatermarkOut]:
        """Return every watermark."""
        recs = await self.calls.fetch(
            "read watermarks", "SELECT * FROM watermarks ORDER BY pipeline"
        )
        return [_row(r) for r in recs]

    async def get(self, pipeline: str) -> WatermarkShown:
        """Return one watermark with its latest moves."""
        async with self.calls.conn("read a watermark") as conn:
            rec = await conn.fetchrow("SELECT * FROM watermarks WHERE pipeline = $1", pipeline)
            if rec is None:
                raise NotFound(f"no watermark for pipeline {pipeline!r}")
            moves = await conn.fetch(_MOVES, pipeline)
        return WatermarkShown(
            **dict(_row(rec)), moves=[WatermarkMoveOut.model_validate(dict(m)) for m in moves]
        )

    async def advance(self, pipeline: str, move: WatermarkMove) -> WatermarkShown:
        """Move a watermark forward (creating it on first use); never backwards."""
        to, by, reason, check = move.to, move.by, move.reason, move.check
        seconds = move.stall_after_seconds
        stall_after = timedelta(seconds=seconds) if seconds is not None else None
        now = self.clock()
        async with self.calls.transaction("advance a watermark") as conn:
            rec = await conn.fetchrow(
                "SELECT * FROM watermarks WHERE pipeline = $1 FOR UPDATE", pipeline
            )
            if rec is None:
                await conn.execute(
                    "INSERT INTO watermarks (pipeline, processed_through, check_name,"
                    " stall_after, advanced_at, updated_at, updated_by, reason)"
                    " VALUES ($1, $2, $3, $4, $5, $5, $6, $7)",
                    pipeline,
                    to,
                    check,
                    stall_after,
                    now,
                    by,
                    reason,
                )
                direction, before = "set", None
            else:
                before = rec["processed_through"]
                if to < before:
                    raise RepairInputError(
                        "to",
                        f"{to.isoformat()} is before processed_through "
                        f"{before.isoformat()}: move the watermark back instead",
                    )
                await conn.execute(
                    "UPDATE watermarks SET processed_through = $2, advanced_at = $3,"
                    " updated_at = $3, updated_by = $4, reason = $5,"
                    " check_name = coalesce($6, check_name),"
                    " stall_after = coalesce($7, stall_after) WHERE pipeline = $1",
                    pipeline,
                    to,
                    now,
                    by,
                    reason,
                    check,
                    stall_after,
                )
                direction = "advance"
            await self._log(conn, pipeline, now, before, to, direction, by, reason, None)
            # Past the point it was moved back from, the pipeline trusts the range again.
            held = await conn.fetchval(
                "SELECT facts->>'from' FROM repair_breaches WHERE kind = 'watermark_moved_back'"
                " AND subject = $1 AND active",
                pipeline,
            )
            if held is not None and to >= datetime.fromisoformat(held):
                await breaches.resolve(conn, "watermark_moved_back", pipeline, now)
            await breaches.resolve(conn, "watermark_stalled", pipeline, now)
        return await self.get(pipeline)

    async def move_back(
        self, pipeline: str, to: datetime, *, by: str, reason: str
    ) -> WatermarkShown:
        """Move a watermark back; without an open backfill of the pipeline it is a breach."""
        async with self.calls.transaction("move a watermark back") as conn:
            await self.move_back_in(conn, pipeline, to, by=by, reason=reason)
        return await self.get(pipeline)

    async def move_back_in(
        self,
        conn: Any,
        pipeline: str,
        to: datetime,
        *,
        by: str,
        reason: str,
        backfill_id: int | None = None,
    ) -> None:
        """Move a watermark back inside the caller's transaction `conn` (a breach likewise)."""
        now = self.clock()
        rec = await conn.fetchrow(
            "SELECT * FROM watermarks WHERE pipeline = $1 FOR UPDATE", pipeline
        )
        if rec is None:
            raise NotFound(f"no watermark for pipeline {pipeline!r}")
        before = rec["processed_through"]
        if to >= before:
            raise RepairInputError(
                "to",
                f"{to.isoformat()} is not before processed_through "
                f"{before.isoformat()}: advance the watermark instead",
            )
        open_ids = [
            r["id"]
            for r in await conn.fetch(
                "SELECT id FROM backfills WHERE pipeline = $1 AND status = ANY($2::text[])",
                pipeline,
                list(OPEN_STATUSES),
            )
        ]
        if backfill_id is not None and backfill_id not in open_ids:
            raise RepairInputError(
                "backfill_id",
                f"backfill {backfill_id} is not an open backfill of pipeline {pipeline!r}",
            )
        await conn.execute(
            "UPDATE watermarks SET processed_through = $2, updated_at = $3, updated_by = $4,"
            " reason = $5 WHERE pipeline = $1",
            pipeline,
            to,
            now,
            by,
            reason,
        )
        under = backfill_id if backfill_id is not None else (open_ids[0] if open_ids else None)
        await self._log(conn, pipeline, now, before, to, "back", by, reason, under)
        if not open_ids:
            await breaches.record(
                conn,
                "watermark_moved_back",
                pipeline,
                f"watermark of {pipeline} moved back from {before.isoformat()} to "
                f"{to.isoformat()} by {by} without an open backfill: {reason}",
                {
                    "pipeline": pipeline,
                    "from": before.isoformat(),
                    "to": to.isoformat(),
                    "by": by,
                    "reason": reason,
                },
                now,
            )

    async def _log(
        self,
        conn: Any,
        pipeline: str,
        now: datetime,
        before: datetime | None,
        to: datetime,
        direction: str,
        by: str,
        reason: str,
        backfill_id: int | None,
    ) -> None:
        await conn.execute(
            "INSERT INTO watermark_moves (pipeline, moved_at, from_ts, to_ts, direction,"
            " moved_by, reason, backfill_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            pipeline,
            now,
            before,
            to,
            direction,
            by,
            reason,
            backfill_id,
        )

    async def judge_stalls(self) -> list[str]:
        """Raise or end `watermark_stalled` for every watermark; return the stalled ones."""
        now = self.clock()
        async with self.calls.transaction("judge watermark stalls") as conn:
            recs = await conn.fetch(
                "SELECT pipeline, advanced_at, stall_after, processed_through FROM watermarks"
                " WHERE stall_after IS NOT NULL"
            )
            stalled = []
            for r in recs:
                if now - r["advanced_at"] > r["stall_after"]:
                    stalled.append(r["pipeline"])
                    await breaches.record(
                        conn,
                        "watermark_stalled",
                        r["pipeline"],
                        f"watermark of {r['pipeline']} has not advanced since "
                        f"{r['advanced_at'].isoformat()} (stall after "
                        f"{r['stall_after'].total_seconds():g}s)",
                        {
                            "pipeline": r["pipeline"],
                            "processed_through": r["processed_through"].isoformat(),
                            "advanced_at": r["advanced_at"].isoformat(),
                        },
                        now,
                    )
            await breaches.resolve_others(conn, "watermark_stalled", stalled, now)
        return stalled
