"""The backfill lifecycle, enforced: plan, announce, start, (recompute), verify, replay, close."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import date, datetime, timedelta
from typing import Any

from driftgauge.config.frozen import Check
from driftgauge.core.paging import Page
from driftgauge.pg.calls import PgCalls
from driftgauge.repair import announce, partitions
from driftgauge.repair.announce import Delivery
from driftgauge.repair.backfill_rows import listed, load, shown
from driftgauge.repair.errors import Refused, RepairInputError
from driftgauge.repair.models import BackfillOut, BackfillShown, PlanIn
from driftgauge.repair.partitions import Partition, Snapshot
from driftgauge.repair.parts import CheckParts, Sides
from driftgauge.repair.plan import Plan, drifting_targets, readers_of
from driftgauge.repair.readlog import ReadLog
from driftgauge.repair.watermarks import Watermarks


def _json(value: Any) -> str:
    return json.dumps(value, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v))


async def _set_targets(
    conn: Any, bf: BackfillOut, column: str, values: Mapping[datetime, Any]
) -> None:
    """Write one JSON column (before, after, verified) of each target partition."""
    await conn.executemany(
        f"UPDATE backfill_targets SET {column} = $3::jsonb WHERE backfill_id = $1"
        " AND partition_start = $2",
        [(bf.id, lo, _json(values[lo])) for lo, _ in bf.partitions],
    )


class Backfills(CheckParts):
    """Run each lifecycle step against the state database, refusing what the rules forbid."""

    def __init__(
        self,
        calls: PgCalls,
        checks: Mapping[str, Check],
        sides: Sides,
        watermarks: Watermarks,
        reads: ReadLog,
        clock: Callable[[], datetime],
        on_change: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(calls, checks, sides, clock)
        self.watermarks = watermarks
        self.reads = reads
        self.on_change = on_change

    async def event(
        self,
        backfill_id: int | None,
        check: str,
        step: str,
        outcome: str,
        *,
        rule: str = "",
        actor: str = "",
        consumer: str | None = None,
        detail: str = "",
        conn: Any = None,
    ) -> None:
        """Append one step, refusal or delivery to the backfill's event log."""
        args = (backfill_id, check, self.clock(), step, outcome, rule, actor, consumer, detail)
        sql = (
            "INSERT INTO backfill_events (backfill_id, check_name, at, step, outcome, rule,"
            " actor, consumer, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        )
        if conn is not None:
            await conn.execute(sql, *args)
            return
        await self.calls.execute("log a backfill event", sql, *args)

    async def refuse(
        self,
        bf: BackfillOut,
        step: str,
        rule: str,
        detail: str,
        by: str,
        *,
        status: int = 409,
    ) -> Refused:
        """Log a refused step and return the error to raise."""
        await self.event(bf.id, bf.check, step, "refused", rule=rule, actor=by, detail=detail)
        await self._changed()
        return Refused(step, rule, detail, status=status)

    async def _changed(self) -> None:
        if self.on_change is not None:
            await self.on_change()

    # -- plan ------------------------------------------------------------------------------------

    async def plan(self, asked: PlanIn) -> BackfillShown:
        """Plan a backfill of the check's drifting hours found by the stored runs."""
        check = self._check(asked.check)
        today = self.clock().astimezone(check.timezone).date()
        until = asked.until or today
        since = asked.since or until - timedelta(days=check.schedule.recent_days - 1)
        if since > until:
            raise RepairInputError("since", f"{since} is after until {until}")
        try:
            bf_id = await self._plan(check, since, until, asked)
        except Refused as exc:
            # Logged apart: the plan's own transaction rolled back.
            await self.event(
                exc.backfill_id,
                check.name,
                "plan",
                "refused",
                rule=exc.rule,
                actor=asked.by,
                detail=exc.detail,
            )
            await self._changed()
            raise
        await self._changed()
        return await self.show(bf_id)

    async def _plan(self, check: Check, since: date, until: date, asked: PlanIn) -> int:
        async with self.calls.transaction("plan a backfill") as conn:
            # Plans of one check serialise here, so two cannot claim the same partitions.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                f"driftgauge-backfill-plan/{check.name}",
            )
            targets = await drifting_targets(conn, check.name, since, until, check.timezone)
            if not targets:
                raise Refused(
                    "plan",
                    "nothing_to_repair",
                    f"the stored runs of {check.name} show no drifting hour in {since}..{until}",
                    status=422,
                )
            await _refuse_overlap(conn, check.name, targets)
            plan = Plan(targets)
            plan.consumers = await readers_of(conn, check.name, [(t.start, t.end) for t in targets])
            pipeline = asked.pipeline
            if pipeline is not None:
                await _require_watermark(conn, pipeline)
            bf_id: int = await conn.fetchval(
                "INSERT INTO backfills (check_name, pipeline, status, reason, first_bad,"
                " reset_to, planned_at, planned_by) VALUES ($1, $2, 'planned', $3, $4, $5,"
                " $6, $7) RETURNING id",
                check.name,
                pipeline,
                asked.reason,
                plan.first_bad,
                plan.reset_to,
                self.clock(),
                asked.by,
            )
            await conn.executemany(
                "INSERT INTO backfill_targets (backfill_id, partition_start, partition_end,"
                " run_id) VALUES ($1, $2, $3, $4)",
                [(bf_id, t.start, t.end, t.run_id) for t in targets],
            )
            await conn.executemany(
                "INSERT INTO backfill_consumers (backfill_id, consumer, rank, signs)"
                " VALUES ($1, $2, $3, $4)",
                [(bf_id, c.name, c.rank, c.signs) for c in plan.consumers],
            )
            await self.event(
                bf_id,
                check.name,
                "plan",
                "done",
                actor=asked.by,
                conn=conn,
                detail=f"{len(targets)} partition(s), first bad "
                f"{plan.first_bad.isoformat()}, {len(plan.consumers)} consumer(s)",
            )
        return bf_id

    # -- reading ---------------------------------------------------------------------------------

    async def show(self, bf_id: int) -> BackfillShown:
        """Return a backfill with its targets, consumers, replays, ledger runs and events."""
        async with self.calls.conn("read a backfill") as conn:
            return await shown(conn, bf_id)

    async def all(
        self, *, check: str | None = None, open_only: bool = False, page: Page
    ) -> list[BackfillOut]:
        """Return backfills, newest first (without their events)."""
        async with self.calls.conn("list backfills") as conn:
            return await listed(conn, check=check, open_only=open_only, page=page)

    def _expect(self, bf: BackfillOut, step: str, allowed: tuple[str, ...]) -> str | None:
        if bf.status in allowed:
            return None
        return (
            f"backfill {bf.id} is {bf.status}: {step} needs it "
            f"{' or '.join(allowed)}; next step is {bf.next_step}"
        )

    async def _snapshots(
        self, check: str, parts: list[Partition], side: int
    ) -> dict[datetime, Snapshot]:
        adapters = await self.sides(check)
        return await partitions.capture(adapters[side], parts)

    # -- announce --------------------------------------------------------------------------------

    async def in_order(self, bf: BackfillOut, step: str, allowed: tuple[str, ...], by: str) -> None:
        """Refuse `step` as out of order unless the backfill stands in an `allowed` status."""
        wrong = self._expect(bf, step, allowed)
        if wrong:
            raise await self.refuse(bf, step, "out_of_order", wrong, by)

    async def _ready(self, bf_id: int, step: str, allowed: tuple[str, ...], by: str) -> BackfillOut:
        """Load a backfill and refuse `step` unless it stands in an `allowed` status."""
        async with self.calls.conn("read a backfill") as conn:
            bf = await load(conn, bf_id)
        await self.in_order(bf, step, allowed, by)
        return bf

    async def announce(
        self, bf_id: int, *, by: str, runs_at: datetime | None = None
    ) -> BackfillShown:
        """Capture the before totals, render the announcement and post it to the consumers."""
        bf = await self._ready(bf_id, "announce", ("planned",), by)
        before = await self._snapshots(bf.check, bf.partitions, 1)
        expected = await self._snapshots(bf.check, bf.partitions, 0)
        total_before = partitions.totals(before.values())
        text = announce.render(bf, total_before, partitions.totals(expected.values()), runs_at)
        body = {
            "event": "backfill_announced",
            "backfill_id": bf_id,
            "check": bf.check,
            "announcement": text,
            "totals_before": total_before,
            "partitions": [[lo.isoformat(), hi.isoformat()] for lo, hi in bf.partitions],
            "runs_at": runs_at.isoformat() if runs_at else None,
        }
        failed = await self._post_announcement(bf, body, by)
        if failed:
            raise await self.refuse(
                bf,
                "announce",
                "announcement_undelivered",
                "not every consumer got the announcement ("
                + "; ".join(f"{d.consumer}: {d.detail}" for d in failed)
                + "); fix and announce again",
                by,
            )
        now = self.clock()
        async with self.calls.transaction("announce a backfill") as conn:
            current = await load(conn, bf_id, lock=True)
            if current.status != "planned":
                raise Refused(
                    "announce",
                    "out_of_order",
                    f"backfill {bf_id} became {current.status} meanwhile",
                )
            # The before totals are written with announced_at: after the recompute's
            # delete they exist nowhere else.
            await _set_targets(conn, bf, "before", before)
            await conn.execute(
                "UPDATE backfills SET status = 'announced', announced_at = $2,"
                " announced_by = $3, announcement = $4, totals_before = $5::jsonb"
                " WHERE id = $1",
                bf_id,
                now,
                by,
                text,
                _json(total_before),
            )
            await self.event(
                bf_id,
                bf.check,
                "announce",
                "done",
                actor=by,
                conn=conn,
                detail=f"before: {partitions.describe(total_before)}",
            )
        await self._changed()
        return await self.show(bf_id)

    async def _post_announcement(
        self, bf: BackfillOut, body: dict[str, Any], by: str
    ) -> list[Delivery]:
        """Post the announcement to each consumer with a webhook; return the undelivered."""
        failed = []
        for c in bf.consumers:
            if not c.webhook_url:
                continue
            got = await announce.post(c.webhook_url, {**body, "consumer": c.name}, c.name)
            await self.event(
                bf.id,
                bf.check,
                "announce",
                "delivered" if got.delivered else "undelivered",
                actor=by,
                consumer=c.name,
                detail=got.detail,
            )
            if not got.delivered:
                failed.append(got)
        return failed

    # -- start -----------------------------------------------------------------------------------

    async def start(self, bf_id: int, *, by: str) -> BackfillShown:
        """Allow the recompute: only announced when signed, only closed partitions."""
        bf = await self._ready(bf_id, "start", ("planned", "announced"), by)
        await self._refuse_unannounced(bf, by)
        now = self.clock()
        await self._refuse_open(bf, now, by)
        before = None
        if bf.status == "planned":  # nobody signed: the before is taken now
            before = await self._snapshots(bf.check, bf.partitions, 1)
        async with self.calls.transaction("start a backfill") as conn:
            current = await load(conn, bf_id, lock=True)
            if current.status != bf.status:
                raise Refused(
                    "start",
                    "out_of_order",
                    f"backfill {bf_id} became {current.status} meanwhile",
                )
            if before is not None:
                await _set_targets(conn, bf, "before", before)
                await conn.execute(
                    "UPDATE backfills SET totals_before = $2::jsonb WHERE id = $1",
                    bf_id,
                    _json(partitions.totals(before.values())),
                )
            await conn.execute(
                "UPDATE backfills SET status = 'running', started_at = $2, started_by = $3"
                " WHERE id = $1",
                bf_id,
                now,
                by,
            )
            moved = await self._reset_watermark(conn, bf, by)
            await self.event(
                bf_id,
                bf.check,
                "start",
                "done",
                actor=by,
                conn=conn,
                detail=f"{len(bf.partitions)} partition(s) may be recomputed" + moved,
            )
        await self._changed()
        return await self.show(bf_id)

    async def _refuse_unannounced(self, bf: BackfillOut, by: str) -> None:
        """Refuse a start that signing consumers were not told of."""
        signing = [c for c in bf.consumers if c.signs]
        if bf.status == "planned" and signing:
            names = ", ".join(f"{c.name} (signed by {c.signed_by})" for c in signing)
            raise await self.refuse(
                bf,
                "start",
                "not_announced",
                f"signing consumers read these partitions: {names}; announce first",
                by,
            )

    async def _refuse_open(self, bf: BackfillOut, now: datetime, by: str) -> None:
        """Refuse a start over partitions younger than the check's settle window."""
        check = self._check(bf.check)
        closed_before = now - check.settle
        young = [(lo, hi) for lo, hi in bf.partitions if hi > closed_before]
        if young:
            raise await self.refuse(
                bf,
                "start",
                "open_partition",
                f"{len(young)} partition(s) are younger than the settle window "
                f"({check.settle.total_seconds():g}s), first {young[0][0].isoformat()}; "
                f"only closed partitions may be backfilled",
                by,
            )

    async def _reset_watermark(self, conn: Any, bf: BackfillOut, by: str) -> str:
        """Move the backfill's pipeline watermark back to its reset point; say so, or ""."""
        moved = ""
        if bf.pipeline is not None:
            mark = await conn.fetchval(
                "SELECT processed_through FROM watermarks WHERE pipeline = $1", bf.pipeline
            )
            if mark is not None and mark > bf.reset_to:
                await self.watermarks.move_back_in(
                    conn,
                    bf.pipeline,
                    bf.reset_to,
                    by=by,
                    backfill_id=bf.id,
                    reason=f"backfill {bf.id}: recompute from {bf.first_bad.isoformat()}",
                )
                moved = f"; watermark {bf.pipeline} moved back to {bf.reset_to.isoformat()}"
        return moved

    async def attach_run(self, bf_id: int, ledger_run_id: int, *, by: str = "") -> None:
        """Record that a ledger run is part of the backfill's recompute."""
        async with self.calls.conn("read a backfill") as conn:
            bf = await load(conn, bf_id)
            known = await conn.fetchval("SELECT 1 FROM ledger_runs WHERE id = $1", ledger_run_id)
        if known is None:
            raise RepairInputError("ledger_run_id", f"no ledger run {ledger_run_id}")
        wrong = self._expect(bf, "recompute", ("running",))
        if wrong:
            raise await self.refuse(bf, "recompute", "not_started", wrong, by)
        await self.calls.execute(
            "attach a ledger run",
            "INSERT INTO backfill_runs (backfill_id, ledger_run_id, attached_at)"
            " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            bf_id,
            ledger_run_id,
            self.clock(),
        )

    # -- verify ----------------------------------------------------------------------------------

    async def verify(self, bf_id: int, *, by: str) -> BackfillShown:
        """Re-reconcile every target partition: source and reader must hold the same rows."""
        async with self.calls.conn("read a backfill") as conn:
            bf = await load(conn, bf_id)
            appended = await conn.fetch(
                "SELECT subject, detail FROM repair_breaches WHERE kind = 'rerun_appended'"
                " AND active AND facts->>'check' = $1"
                " AND (facts->>'start')::timestamptz < $3 AND (facts->>'end')::timestamptz > $2",
                bf.check,
                bf.partitions[0][0],
                bf.partitions[-1][1],
            )
        await self.in_order(bf, "verify", ("running",), by)
        if appended:
            raise await self.refuse(
                bf,
                "verify",
                "rerun_appended",
                f"the step is not idempotent here: {appended[0]['detail']}",
                by,
            )
        source = await self._snapshots(bf.check, bf.partitions, 0)
        reader = await self._snapshots(bf.check, bf.partitions, 1)
        results = {
            lo: {
                "source": source[lo],
                "reader": reader[lo],
                "ok": partitions.same(source[lo], reader[lo]),
            }
            for lo, _ in bf.partitions
        }
        async with self.calls.conn("record a verification") as conn:
            await _set_targets(conn, bf, "verified", results)
        bad = [lo for lo, v in results.items() if not v["ok"]]
        if bad:
            shown = ", ".join(
                f"{lo.isoformat()} (source {partitions.describe(source[lo])}, "
                f"reader {partitions.describe(reader[lo])})"
                for lo in bad[:5]
            )
            raise await self.refuse(
                bf,
                "verify",
                "targets_not_ok",
                f"{len(bad)} of {len(results)} partition(s) still differ: {shown}",
                by,
            )
        async with self.calls.transaction("verify a backfill") as conn:
            await conn.execute(
                "UPDATE backfills SET status = 'verified', verified_at = $2"
                " WHERE id = $1 AND status = 'running'",
                bf_id,
                self.clock(),
            )
            await self.event(
                bf_id,
                bf.check,
                "verify",
                "done",
                actor=by,
                conn=conn,
                detail=f"all {len(results)} partition(s) ok",
            )
            if not bf.consumers:
                await conn.execute(
                    "UPDATE backfills SET status = 'replayed', replayed_at = $2 WHERE id = $1",
                    bf_id,
                    self.clock(),
                )
        await self._changed()
        return await self.show(bf_id)

    # -- close -----------------------------------------------------------------------------------

    async def close(self, bf_id: int, *, by: str) -> BackfillShown:
        """File the backfill log row: partitions, totals before and after, the diff."""
        bf = await self._ready(bf_id, "close", ("replayed",), by)
        after = await self._snapshots(bf.check, bf.partitions, 1)
        total_after = partitions.totals(after.values())
        change = partitions.diff(bf.totals_before, total_after)
        async with self.calls.transaction("close a backfill") as conn:
            await _set_targets(conn, bf, "after", after)
            await conn.execute(
                "UPDATE backfills SET status = 'closed', closed_at = $2, closed_by = $3,"
                " totals_after = $4::jsonb, diff = $5::jsonb WHERE id = $1",
                bf_id,
                self.clock(),
                by,
                _json(total_after),
                _json(change),
            )
            await self.event(
                bf_id,
                bf.check,
                "close",
                "done",
                actor=by,
                conn=conn,
                detail=f"before {partitions.describe(bf.totals_before)}; after "
                f"{partitions.describe(total_after)}; diff {change}",
            )
        await self._changed()
        return await self.show(bf_id)


async def _refuse_overlap(conn: Any, check: str, targets: list[Any]) -> None:
    """Refuse a plan over partitions an open backfill of the check already holds."""
    taken = await conn.fetch(
        "SELECT b.id, min(t.partition_start) AS first FROM backfills b"
        " JOIN backfill_targets t ON t.backfill_id = b.id WHERE b.check_name = $1"
        " AND b.status <> 'closed' AND t.partition_start = ANY($2::timestamptz[])"
        " GROUP BY b.id ORDER BY b.id",
        check,
        [t.start for t in targets],
    )
    if taken:
        refused = Refused(
            "plan",
            "overlapping_backfill",
            f"backfill {taken[0]['id']} of {check} is open over "
            f"{taken[0]['first'].isoformat()}; close it first",
        )
        refused.backfill_id = taken[0]["id"]
        raise refused


async def _require_watermark(conn: Any, pipeline: str) -> None:
    """Refuse (naming the field) a pipeline that has no watermark to move back."""
    if await conn.fetchval("SELECT 1 FROM watermarks WHERE pipeline = $1", pipeline) is None:
        raise RepairInputError("pipeline", f"no watermark for pipeline {pipeline!r}")
