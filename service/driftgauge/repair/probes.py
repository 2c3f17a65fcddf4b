"""Rerun probes: is a partition step idempotent? Compare partitions after run 1 and run 2."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from driftgauge.config.frozen import Check
from driftgauge.repair import breaches, partitions
from driftgauge.repair.errors import Refused, RepairInputError
from driftgauge.repair.models import ProbeOut, ProbePartitionOut, RerunProbed
from driftgauge.repair.partitions import HOUR, Snapshot
from driftgauge.repair.parts import CheckParts
from driftgauge.repair.replay import CommandRunner

Verdict = Literal["converged", "appended", "changed"]
LEDGER_LOOKBACK = timedelta(days=7)


@dataclass
class Observed:
    """One partition after run 1 and after run 2, and what that says about the step."""

    start: datetime
    end: datetime
    run1: Snapshot
    run2: Snapshot
    # The rows run 2 wrote, when known (None for a step): only growth by exactly that many
    # is an append.
    second_input: int | None

    @property
    def appended(self) -> int:
        """Return how many rows run 2 added (0 unless the count grew)."""
        return max(0, int(self.run2["count"]) - int(self.run1["count"]))

    @property
    def out(self) -> ProbePartitionOut:
        """Return the partition as the probe's answer shows it."""
        return ProbePartitionOut.model_validate(self, from_attributes=True)

    @property
    def verdict(self) -> Verdict:
        """Return converged (identical), appended (more rows) or changed (other content)."""
        if partitions.same(self.run1, self.run2):
            return "converged"
        if self.second_input is not None and self.appended != self.second_input:
            return "changed"  # the partition moved for another reason than the rerun
        return "appended" if self.appended else "changed"


def _worst(found: list[Observed]) -> Verdict:
    verdicts = {o.verdict for o in found}
    return (
        "appended"
        if "appended" in verdicts
        else ("changed" if "changed" in verdicts else "converged")
    )


class RerunProbe(CheckParts):
    """Run a step twice on a staging copy, or observe two ledger runs of one window."""

    async def step(
        self, check_name: str, start: datetime, end: datetime, command: str, run: CommandRunner
    ) -> RerunProbed:
        """Run `command` twice for [start, end) and compare the check's reader after each run.

        Point the check's reader view at the staging copy the command writes.
        """
        check = self._check(check_name)
        if end <= start:
            raise RepairInputError("end", "must be after start")
        reader = (await self.sides(check.name))[1]
        parts = [(at, min(at + HOUR, end)) for at in _hours(start, end)]
        env = {
            "DRIFTGAUGE_PARTITION_START": start.isoformat(),
            "DRIFTGAUGE_PARTITION_END": end.isoformat(),
            "DRIFTGAUGE_CHECK": check.name,
        }
        after: list[dict[datetime, Snapshot]] = []
        for attempt in (1, 2):
            ok, detail = await run(command, {**env, "DRIFTGAUGE_RERUN": str(attempt)})
            if not ok:
                raise Refused(
                    "probe",
                    "step_failed",
                    f"run {attempt} of the step failed: {detail}",
                    status=422,
                )
            after.append(await partitions.capture(reader, parts))
        found = [Observed(lo, hi, after[0][lo], after[1][lo], None) for lo, hi in parts]
        return await self._record(check.name, "step", command, found)

    async def ledger(
        self,
        check_name: str,
        *,
        window_start: datetime | None = None,
        window_end: datetime | None = None,
    ) -> ProbeOut:
        """Compare the reader after the last two closed ledger runs of one window."""
        check = self._check(check_name)
        if check.ledger is None:
            raise RepairInputError("check", f"check {check.name!r} has no ledger job")
        job = check.ledger.job
        async with self.calls.conn("read ledger runs of a window") as conn:
            if window_start is None or window_end is None:
                window_start, window_end = await _latest_rerun_window(conn, job)
            first, second = await _last_two_runs(conn, job, window_start, window_end)
            one = await _reconciled(
                conn, check, window_start, first["closed_at"], second["opened_at"]
            )
            two = await _reconciled(conn, check, window_start, second["closed_at"], None)
            await _refuse_other_writers(conn, check, job, first, second, window_start)
            written = await conn.fetchval(
                "SELECT coalesce(sum(rows), 0) FROM ledger_outcomes WHERE run_id = $1"
                " AND outcome = 'written'",
                second["id"],
            )
        if one is None or two is None:
            which = "run 1" if one is None else "run 2"
            raise Refused(
                "probe",
                "unobserved",
                f"no reconciliation of {check.name} stored between {which} of "
                f"{job}'s window {window_start.isoformat()} closing and the next "
                f"write: the partition after it is unknown",
                status=422,
            )
        day_start, day_end = one[1], one[2]
        found = [Observed(day_start, day_end, one[0], two[0], int(written))]
        result = await self._record(
            check.name,
            "ledger",
            f"{job} runs {first['id']}, {second['id']}",
            found,
            second_written=int(written),
        )
        return ProbeOut(**dict(result), ledger_runs=[first["id"], second["id"]])

    async def _record(
        self,
        check: str,
        mode: str,
        what: str,
        found: list[Observed],
        *,
        second_written: int | None = None,
    ) -> RerunProbed:
        now = self.clock()
        verdict = _worst(found)
        async with self.calls.transaction("record a rerun probe") as conn:
            for o in found:
                await conn.execute(
                    "INSERT INTO probe_results (check_name, mode, subject, partition_start,"
                    " partition_end, run1, run2, verdict, appended, probed_at)"
                    " VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10)",
                    check,
                    mode,
                    what,
                    o.start,
                    o.end,
                    json.dumps(o.run1),
                    json.dumps(o.run2),
                    o.verdict,
                    o.appended,
                    now,
                )
            await _breach_appended(conn, check, mode, what, found, second_written, now)
        return RerunProbed(
            check=check, mode=mode, subject=what, verdict=verdict, partitions=[o.out for o in found]
        )

    async def judge_ledger(self) -> int:
        """Probe every recent ledger window with two closed runs; return how many were judged."""
        judged = 0
        since = self.clock() - LEDGER_LOOKBACK
        for check in self.checks.values():
            if check.ledger is None:
                continue
            windows = await self.calls.fetch(
                "read rerun windows",
                "SELECT window_start, window_end FROM ledger_runs WHERE job = $1"
                " AND closed_at > $2 GROUP BY window_start, window_end"
                " HAVING count(closed_at) >= 2",
                check.ledger.job,
                since,
            )
            for w in windows:
                try:
                    await self.ledger(
                        check.name, window_start=w["window_start"], window_end=w["window_end"]
                    )
                    judged += 1
                except Refused:
                    continue  # not reconciled yet in between: judged on a later pass
        return judged


def _day_of(check: Check, at: datetime) -> tuple[datetime, datetime]:
    """Return the check's day bucket holding `at`: [start, end)."""
    day = at.astimezone(check.timezone).date()
    nxt = day + timedelta(days=1)
    return (
        datetime(day.year, day.month, day.day, tzinfo=check.timezone),
        datetime(nxt.year, nxt.month, nxt.day, tzinfo=check.timezone),
    )


def _hours(start: datetime, end: datetime) -> list[datetime]:
    out, at = [], start
    while at < end:
        out.append(at)
        at += HOUR
    return out


async def _reconciled(
    conn: Any, check: Check, window_start: datetime, after: datetime, before: datetime | None
) -> tuple[Snapshot, datetime, datetime] | None:
    """Return the reader's day of `window_start` from the first reconciliation in between."""
    day = window_start.astimezone(check.timezone).date()
    rec = await conn.fetchrow(
        "SELECT b.*, r.row_hash FROM buckets b JOIN runs r ON r.id = b.run_id"
        " WHERE r.check_name = $1"
        " AND r.complete AND b.day = $2 AND r.started_at >= $3"
        " AND ($4::timestamptz IS NULL OR r.finished_at <= $4)"
        " ORDER BY r.started_at, r.id LIMIT 1",
        check.name,
        day,
        after,
        before,
    )
    if rec is None:
        return None
    nxt = day + timedelta(days=1)
    end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=check.timezone)
    snap: Snapshot = {
        "count": int(rec["reader_count"]),
        "distinct_keys": int(rec["reader_distinct"]),
        "digest": str(rec["reader_digest"]),
    }
    if rec["row_hash"] != "md5":
        snap["row_hash"] = rec["row_hash"]
    # Measure totals, once buckets carry them: {"reader": {name: total}, ...}.
    measures = rec.get("measures")
    if isinstance(measures, str):
        measures = json.loads(measures)
    if isinstance(measures, dict) and isinstance(measures.get("reader"), dict):
        snap["measures"] = {k: str(v) for k, v in sorted(measures["reader"].items())}
    return snap, rec["start_at"], end


async def _latest_rerun_window(conn: Any, job: str) -> tuple[datetime, datetime]:
    """Return the window of `job` most recently closed twice, or refuse: no rerun to probe."""
    rec = await conn.fetchrow(
        "SELECT window_start, window_end FROM ledger_runs WHERE job = $1"
        " AND closed_at IS NOT NULL GROUP BY window_start, window_end"
        " HAVING count(*) >= 2 ORDER BY max(closed_at) DESC LIMIT 1",
        job,
    )
    if rec is None:
        raise Refused(
            "probe",
            "no_rerun",
            f"job {job} has no window with two closed runs",
            status=422,
        )
    return rec["window_start"], rec["window_end"]


async def _last_two_runs(
    conn: Any, job: str, window_start: datetime, window_end: datetime
) -> tuple[Any, Any]:
    """Return the last two closed runs of one window of `job`, oldest first, or refuse."""
    runs = await conn.fetch(
        "SELECT id, opened_at, closed_at FROM ledger_runs WHERE job = $1"
        " AND window_start = $2 AND window_end = $3 AND closed_at IS NOT NULL"
        " ORDER BY id DESC LIMIT 2",
        job,
        window_start,
        window_end,
    )
    if len(runs) < 2:
        raise Refused(
            "probe",
            "no_rerun",
            f"job {job} has {len(runs)} closed run(s) of window {window_start.isoformat()}",
            status=422,
        )
    return runs[1], runs[0]


async def _refuse_other_writers(
    conn: Any, check: Check, job: str, first: Any, second: Any, window_start: datetime
) -> None:
    """Refuse when another run of `job` wrote the same day between the two runs."""
    others = await conn.fetchval(
        "SELECT count(*) FROM ledger_runs WHERE job = $1 AND closed_at > $2"
        " AND closed_at <= $3 AND id <> $4 AND window_start < $6"
        " AND window_end > $5",
        job,
        first["closed_at"],
        second["closed_at"],
        second["id"],
        *_day_of(check, window_start),
    )
    if others:
        raise Refused(
            "probe",
            "unobserved",
            f"{others} other run(s) of {job} wrote the same day between the"
            f" two runs of window {window_start.isoformat()}: the day's "
            "growth cannot be put on the rerun",
            status=422,
        )


async def _breach_appended(
    conn: Any,
    check: str,
    mode: str,
    what: str,
    found: list[Observed],
    second_written: int | None,
    now: datetime,
) -> None:
    """Record a rerun_appended breach per partition a rerun grew; resolve it where it did not."""
    for o in found:
        name = f"{check}/{o.start.isoformat()}"
        if o.verdict != "appended":
            await breaches.resolve(conn, "rerun_appended", name, now)
            continue
        by_input = (
            f"; the second run's input was {second_written} row(s)"
            if second_written is not None
            else ""
        )
        await breaches.record(
            conn,
            "rerun_appended",
            name,
            f"rerunning {what} appended {o.appended} row(s) to partition "
            f"{o.start.isoformat()} of {check} ({partitions.describe(o.run1)} after "
            f"run 1, {partitions.describe(o.run2)} after run 2){by_input}",
            {
                "check": check,
                "start": o.start.isoformat(),
                "end": o.end.isoformat(),
                "mode": mode,
                "subject": what,
                "run1": o.run1,
                "run2": o.run2,
                "appended": o.appended,
            },
            now,
        )
