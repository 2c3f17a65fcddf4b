"""Replay: re-trigger a backfill's consumers in rank order, each finished before the next rank."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from driftgauge.repair import announce
from driftgauge.repair.backfill import Backfills
from driftgauge.repair.errors import RepairInputError
from driftgauge.repair.models import BackfillConsumerOut, BackfillOut, BackfillShown

CommandRunner = Callable[[str, Mapping[str, str]], Awaitable[tuple[bool, str]]]
"""Run a consumer's re-trigger command with the backfill in its environment: (ok, detail)."""


class Replays:
    """Re-trigger consumers: webhooks are posted; commands run only where a runner is given."""

    def __init__(self, backfills: Backfills, run_command: CommandRunner | None = None) -> None:
        self.backfills = backfills
        self.run_command = run_command

    async def replay(self, bf_id: int, *, by: str, consumer: str | None = None) -> BackfillShown:
        """Re-trigger one consumer, or every unfinished one in rank order until one waits."""
        bf = await self.backfills.show(bf_id)
        await self.backfills.in_order(bf, "replay", ("verified",), by)
        if consumer is not None:
            await self._one(bf, consumer, by)
            return await self.backfills.show(bf_id)
        for c in bf.consumers:
            bf = await self.backfills.show(bf_id)
            if _finished(_entry(bf, c.name)):
                continue
            if not await self._one(bf, c.name, by):
                break  # it is still running or failed: later ranks wait for it
        return await self.backfills.show(bf_id)

    async def _one(self, bf: BackfillOut, name: str, by: str) -> bool:
        """Trigger one consumer; return True once it finished."""
        entry = _entry(bf, name)
        if entry is None:
            raise RepairInputError(
                "consumer",
                f"{name!r} did not read backfill {bf.id}'s "
                f"partitions; its consumers are "
                f"{', '.join(c.name for c in bf.consumers)}",
            )
        if _finished(entry):
            return True
        waiting = [c for c in bf.consumers if c.rank < entry.rank and not _finished(c)]
        if waiting:
            names = ", ".join(f"{c.name} (rank {c.rank})" for c in waiting)
            raise await self.backfills.refuse(
                bf,
                "replay",
                "replay_order",
                f"{name} has rank {entry.rank}; {names} must finish first",
                by,
            )
        calls, clock = self.backfills.calls, self.backfills.clock
        await calls.execute(
            "start a replay",
            "INSERT INTO backfill_replays (backfill_id, consumer, rank, started_at, outcome)"
            " VALUES ($1, $2, $3, $4, 'running') ON CONFLICT (backfill_id, consumer)"
            " DO UPDATE SET started_at = EXCLUDED.started_at, finished_at = NULL,"
            " outcome = 'running', detail = ''",
            bf.id,
            name,
            entry.rank,
            clock(),
        )
        got = await self._trigger(bf, entry, name)
        if got is None:
            await self.backfills.event(
                bf.id,
                bf.check,
                "replay",
                "done",
                actor=by,
                consumer=name,
                detail=f"waiting: run {entry.command!r} and report it finished",
            )
            return False
        ok, detail = got
        await self.finish(bf.id, name, ok=ok, detail=detail, by=by)
        return ok

    async def _trigger(
        self, bf: BackfillOut, entry: BackfillConsumerOut, name: str
    ) -> tuple[bool, str] | None:
        """Post a consumer's webhook or run its command: (ok, outcome), or None if neither."""
        if entry.webhook_url:
            posted = await announce.post(
                entry.webhook_url,
                {
                    "event": "backfill_replay",
                    "backfill_id": bf.id,
                    "check": bf.check,
                    "consumer": name,
                    "command": entry.command,
                    "partitions": [[lo.isoformat(), hi.isoformat()] for lo, hi in bf.partitions],
                },
                name,
            )
            return posted.delivered, posted.detail
        if self.run_command is not None and entry.command:
            return await self.run_command(
                entry.command,
                {
                    "DRIFTGAUGE_BACKFILL_ID": str(bf.id),
                    "DRIFTGAUGE_CHECK": bf.check,
                    "DRIFTGAUGE_PARTITIONS_START": bf.partitions[0][0].isoformat(),
                    "DRIFTGAUGE_PARTITIONS_END": bf.partitions[-1][1].isoformat(),
                },
            )
        return None

    async def finish(self, bf_id: int, name: str, *, ok: bool, detail: str, by: str) -> None:
        """Record a consumer's replay outcome; its re-read becomes the new baseline."""
        bf = await self.backfills.show(bf_id)
        entry = _entry(bf, name)
        if entry is None or entry.replay is None:
            raise RepairInputError(
                "consumer", f"{name!r} has no replay under way in backfill {bf_id}"
            )
        calls, clock = self.backfills.calls, self.backfills.clock
        async with calls.transaction("finish a replay") as conn:
            await conn.execute(
                "UPDATE backfill_replays SET finished_at = $3, outcome = $4, detail = $5"
                " WHERE backfill_id = $1 AND consumer = $2",
                bf_id,
                name,
                clock(),
                "finished" if ok else "failed",
                detail,
            )
            if ok:
                await self.backfills.reads.record(
                    name, bf.check, bf.partitions, backfill_id=bf_id, conn=conn
                )
            await self.backfills.event(
                bf_id,
                bf.check,
                "replay",
                "done" if ok else "refused",
                rule="" if ok else "replay_failed",
                actor=by,
                consumer=name,
                detail=detail,
                conn=conn,
            )
            left = await conn.fetchval(
                "SELECT count(*) FROM backfill_consumers b LEFT JOIN backfill_replays p"
                " ON p.backfill_id = b.backfill_id AND p.consumer = b.consumer"
                " WHERE b.backfill_id = $1 AND p.outcome IS DISTINCT FROM 'finished'",
                bf_id,
            )
            if left == 0:
                await conn.execute(
                    "UPDATE backfills SET status = 'replayed', replayed_at = $2"
                    " WHERE id = $1 AND status = 'verified'",
                    bf_id,
                    clock(),
                )
        await self.backfills._changed()


def _entry(bf: BackfillOut, name: str) -> BackfillConsumerOut | None:
    """Return the backfill's consumer named `name`, or None when it read none of its partitions."""
    return next((c for c in bf.consumers if c.name == name), None)


def _finished(entry: BackfillConsumerOut | None) -> bool:
    """Return True when the consumer's replay finished."""
    return entry is not None and entry.replay is not None and entry.replay.outcome == "finished"
