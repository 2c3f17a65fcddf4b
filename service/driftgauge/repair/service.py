"""The repair parts wired together on one state pool and one set of store adapters."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from driftgauge.config.frozen import Check
from driftgauge.core.errors import StateError, StoreError
from driftgauge.pg.calls import PgCalls
from driftgauge.repair import partitions
from driftgauge.repair.backfill import Backfills
from driftgauge.repair.breaches import Breaches
from driftgauge.repair.consumers import Consumers
from driftgauge.repair.guard import SilentChangeGuard
from driftgauge.repair.metrics import RepairMetrics
from driftgauge.repair.models import JudgedOut
from driftgauge.repair.partitions import Partition, Snapshot
from driftgauge.repair.parts import Sides
from driftgauge.repair.probes import RerunProbe
from driftgauge.repair.readlog import ReadLog
from driftgauge.repair.replay import CommandRunner, Replays
from driftgauge.repair.watermarks import Watermarks

log = logging.getLogger("driftgauge.repair")
Answer = TypeVar("Answer")


@dataclass
class Repair:
    """Watermarks, consumers, read log, backfills, replays, guard, probe, breaches, metrics."""

    watermarks: Watermarks
    consumers: Consumers
    reads: ReadLog
    backfills: Backfills
    replays: Replays
    guard: SilentChangeGuard
    probe: RerunProbe
    breaches: Breaches
    metrics: RepairMetrics

    async def judge(self, *, signed: bool = True, rest: bool = True) -> JudgedOut:
        """Judge stalls and ledger reruns (`rest`), silent changes (`signed`); reload metrics."""
        # Silent changes digest every signed partition in its store, so they are judged less
        # often than the state-database-only rules; what is not judged counts nothing.
        stalled = await self.watermarks.judge_stalls() if rest else []
        windows = await self.probe.judge_ledger() if rest else 0
        changes = len(await self.guard.judge()) if signed else 0
        await self.refresh()
        return JudgedOut(stalled=stalled, ledger_windows=windows, silent_changes=changes)

    async def refreshed(self, change: Awaitable[Answer]) -> Answer:
        """Return what `change` answers once it is done, with the metrics reloaded after it."""
        out = await change
        await self.refresh()
        return out

    async def refresh(self) -> None:
        """Reload the metrics snapshot; a failure keeps the last one."""
        try:
            await self.metrics.refresh()
        except StateError as exc:
            log.warning("could not reload repair metrics", extra={"error": str(exc)})


def build_repair(
    calls: PgCalls,
    checks: Mapping[str, Check],
    sides: Sides,
    clock: Callable[[], datetime],
    run_command: CommandRunner | None = None,
) -> Repair:
    """Return the repair parts over `calls` (the state pool) and `sides` (check adapters)."""

    async def capture(check: str, parts: Sequence[Partition]) -> dict[datetime, Snapshot] | None:
        try:
            return await partitions.capture((await sides(check))[1], parts)
        except StoreError as exc:
            # The read is still logged; without a baseline it cannot be judged for a
            # silent change, and the read log says so (seen: null).
            log.warning(
                "could not digest the partitions read", extra={"check": check, "error": str(exc)}
            )
            return None

    metrics = RepairMetrics(calls, clock)
    watermarks = Watermarks(calls, clock)
    reads = ReadLog(calls, clock, capture, list(checks))

    async def changed() -> None:
        try:
            await metrics.refresh()
        except StateError as exc:
            log.warning("could not reload repair metrics", extra={"error": str(exc)})

    backfills = Backfills(calls, checks, sides, watermarks, reads, clock, on_change=changed)
    return Repair(
        watermarks=watermarks,
        consumers=Consumers(calls, clock),
        reads=reads,
        backfills=backfills,
        replays=Replays(backfills, run_command),
        guard=SilentChangeGuard(calls, checks, sides, clock),
        probe=RerunProbe(calls, checks, sides, clock),
        breaches=Breaches(calls),
        metrics=metrics,
    )
