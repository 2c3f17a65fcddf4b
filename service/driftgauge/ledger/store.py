"""The run ledger in the state database: runs, batches, outcomes, keys, windows, breaches."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from driftgauge.ledger.errors import BreachNotFound, LedgerConflict, RunNotFound
from driftgauge.ledger.models import (
    Acknowledge,
    Acknowledgement,
    Batch,
    BreachOut,
    Counts,
    LedgerKeyOut,
    Rule,
    RunOpen,
    RunOut,
    Summary,
    WindowOut,
)
from driftgauge.ledger.rules import RunFacts, WindowFacts
from driftgauge.pg.calls import PgCalls

# The run columns a RunOut shows as they are stored; the summary and tallies are decoded.
_RUN_FIELDS = (
    "id",
    "job",
    "client_run_id",
    "window_start",
    "window_end",
    "window_day",
    "input_rows",
    "opened_at",
    "closed_at",
    "status",
)
# The ledger metrics' reads, each over the jobs ($1): latest window, open breaches,
# breaches and closed runs per job, and what retention pruned of the last two (rows
# deleted by retention still count: these counters must never go down).
_SNAPSHOT_QUERIES = (
    "SELECT DISTINCT ON (job) job, window_day FROM ledger_windows"
    " WHERE job = ANY($1::text[]) ORDER BY job, window_day DESC",
    "SELECT job, rule, count(*) AS n, min(window_day) AS oldest FROM ledger_breaches"
    " WHERE job = ANY($1::text[]) AND active GROUP BY job, rule",
    "SELECT job, rule, count(*) AS n FROM ledger_breaches"
    " WHERE job = ANY($1::text[]) GROUP BY job, rule",
    "SELECT job, status, count(*) AS n, max(closed_at) AS last FROM ledger_runs"
    " WHERE job = ANY($1::text[]) AND closed_at IS NOT NULL GROUP BY job, status",
    "SELECT series, name, label, n FROM pruned_counts"
    " WHERE series IN ('ledger_runs', 'ledger_breaches') AND name = ANY($1::text[])",
)
_RUN_COLUMNS = ", ".join((*_RUN_FIELDS, "summary"))
_BREACH_COLUMNS = (
    "job, window_day, rule, detail, first_seen, last_seen, active,"
    " acknowledged_at, acknowledged_by, acknowledged_reason"
)


@dataclass(frozen=True)
class OpenBreaches:
    """The windows of one job that still breach one rule."""

    windows: int
    oldest: date


@dataclass(frozen=True)
class LedgerSnapshot:
    """What the ledger metrics need, read in one go."""

    latest_window: dict[str, date]
    open: dict[tuple[str, str], OpenBreaches]
    """Per (job, rule), every judged window that still breaches it, however old: a breach
    stays open until its window is judged again and holds."""
    breaches: dict[tuple[str, str], int]
    """Breaches recorded per (job, rule)."""
    last_summary: dict[str, datetime]
    runs: dict[tuple[str, str], int]
    """Closed runs per (job, reported status)."""


def _tally(rows: Mapping[str, int]) -> Counts:
    # Sums of stored rows, not a request body: not held to the body's bounds.
    return Counts.model_construct(
        written=rows.get("written", 0),
        no_match=rows.get("no_match", 0),
        skipped=rows.get("skipped", 0),
        failed=rows.get("failed", 0),
    )


def _summary(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = json.loads(raw) if isinstance(raw, str) else raw
    return value if isinstance(value, dict) else None


class LedgerStore:
    """Reads and writes of the run ledger; every call has a deadline."""

    def __init__(self, pool: Any, timeout: float = 10.0) -> None:
        self._db = PgCalls(pool, timeout)

    async def open_run(self, req: RunOpen, day: date, now: datetime) -> tuple[RunOut, bool]:
        """Insert a run, or return the one with the same client run id; True when new."""
        async with self._db.transaction("open a ledger run") as conn:
            run_id = await conn.fetchval(
                "INSERT INTO ledger_runs (job, client_run_id, window_start, window_end,"
                " window_day, input_rows, opened_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                " ON CONFLICT (job, client_run_id) WHERE client_run_id IS NOT NULL"
                " DO NOTHING RETURNING id",
                req.job,
                req.client_run_id,
                req.window_start,
                req.window_end,
                day,
                req.input_rows,
                now,
            )
            created = run_id is not None
            if not created:
                rec = await conn.fetchrow(
                    f"SELECT {_RUN_COLUMNS} FROM ledger_runs WHERE job = $1 AND client_run_id = $2",
                    req.job,
                    req.client_run_id,
                )
                same = (
                    rec["window_start"] == req.window_start
                    and rec["window_end"] == req.window_end
                    and rec["input_rows"] == req.input_rows
                )
                if not same:
                    raise LedgerConflict(
                        f"client_run_id: run {rec['id']} of job {req.job!r} was opened with "
                        "this id and a different window or input_rows"
                    )
                run_id = rec["id"]
            run = await self._run(conn, run_id)
        return run, created

    async def run(self, run_id: int) -> RunOut:
        """Return one run with its outcome totals; raise RunNotFound if there is none."""
        async with self._db.conn("read a ledger run") as conn:
            return await self._run(conn, run_id)

    async def _run(self, conn: Any, run_id: int) -> RunOut:
        found = await _runs_where(conn, "id = $1", run_id)
        if not found:
            raise RunNotFound(f"run_id: no ledger run {run_id}")
        return found[0]

    async def runs(self, job: str | None, limit: int = 50, offset: int = 0) -> list[RunOut]:
        """Return the most recent runs, newest first, optionally of one job."""
        async with self._db.conn("list ledger runs") as conn:
            return await _runs_where(
                conn,
                "$1::text IS NULL OR job = $1 ORDER BY id DESC LIMIT $2 OFFSET $3",
                job,
                limit,
                offset,
            )

    async def add_batch(self, run_id: int, batch: Batch, now: datetime) -> tuple[bool, RunOut]:
        """Record a batch once; return (True if it was a retry already counted, the run)."""
        sha = batch.fingerprint()
        async with self._db.transaction("record a ledger batch", scale=3) as conn:
            # Lock the run so a concurrent close cannot slip between the check and the insert.
            rec = await conn.fetchrow(
                "SELECT closed_at FROM ledger_runs WHERE id = $1 FOR UPDATE", run_id
            )
            if rec is None:
                raise RunNotFound(f"run_id: no ledger run {run_id}")
            seen = await conn.fetchval(
                "SELECT payload_sha256 FROM ledger_batches WHERE run_id = $1 AND batch_id = $2",
                run_id,
                batch.batch_id,
            )
            if seen is not None:
                if seen != sha:
                    raise LedgerConflict(
                        f"batch_id: batch {batch.batch_id!r} of run {run_id} "
                        "was already recorded with different content"
                    )
                return True, await self._run(conn, run_id)
            if rec["closed_at"] is not None:
                raise LedgerConflict(f"run_id: run {run_id} is closed; it takes no more batches")
            await conn.execute(
                "INSERT INTO ledger_batches (run_id, batch_id, payload_sha256,"
                " received_at) VALUES ($1, $2, $3, $4)",
                run_id,
                batch.batch_id,
                sha,
                now,
            )
            await conn.executemany(
                "INSERT INTO ledger_outcomes (run_id, outcome, reason, rows)"
                " VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, outcome, reason)"
                " DO UPDATE SET rows = ledger_outcomes.rows + EXCLUDED.rows",
                [(run_id, o, r, n) for (o, r), n in sorted(batch.totals().items())],
            )
            keyed = [
                (run_id, k.key, k.outcome, k.detail, batch.batch_id)
                for k in batch.keys
                if k.outcome != "written"
            ]
            if keyed:
                await conn.copy_records_to_table(
                    "ledger_keys",
                    records=keyed,
                    columns=("run_id", "key", "outcome", "reason", "batch_id"),
                )
            return False, await self._run(conn, run_id)

    async def close_run(self, run_id: int, summary: Summary, now: datetime) -> tuple[RunOut, bool]:
        """Store the job's summary; a repeat of the same summary is a no-op (False)."""
        body = summary.model_dump(mode="json")
        async with self._db.transaction("close a ledger run") as conn:
            rec = await conn.fetchrow(
                "SELECT summary FROM ledger_runs WHERE id = $1 FOR UPDATE", run_id
            )
            if rec is None:
                raise RunNotFound(f"run_id: no ledger run {run_id}")
            before = _summary(rec["summary"])
            if before is not None:
                if before != body:
                    raise LedgerConflict(
                        f"run_id: run {run_id} was already closed with a different summary"
                    )
                return await self._run(conn, run_id), False
            await conn.execute(
                "UPDATE ledger_runs SET closed_at = $2, status = $3,"
                " summary = $4::jsonb WHERE id = $1",
                run_id,
                now,
                summary.status,
                json.dumps(body),
            )
            return await self._run(conn, run_id), True

    async def window_facts(self, job: str, day: date, due: bool) -> WindowFacts:
        """Return what every run of the job's window reported."""
        recs = await self._db.fetch(
            "read a ledger window",
            "SELECT r.id, r.input_rows, r.status, r.summary,"
            " coalesce(jsonb_object_agg(o.outcome, o.rows)"
            "   FILTER (WHERE o.outcome IS NOT NULL), '{}') AS outcomes"
            " FROM ledger_runs r LEFT JOIN (SELECT run_id, outcome, sum(rows)::bigint AS rows"
            "   FROM ledger_outcomes GROUP BY run_id, outcome) o ON o.run_id = r.id"
            " WHERE r.job = $1 AND r.window_day = $2 GROUP BY r.id ORDER BY r.id",
            job,
            day,
        )
        runs = []
        for r in recs:
            summary = _summary(r["summary"])
            counts = summary.get("counts") if summary else None
            runs.append(
                RunFacts(
                    run_id=r["id"],
                    input_rows=r["input_rows"],
                    outcomes=_tally({k: int(v) for k, v in json.loads(r["outcomes"]).items()}),
                    status=r["status"],
                    summary_counts=_tally(counts) if isinstance(counts, dict) else None,
                )
            )
        return WindowFacts(job, day, due, tuple(runs))

    async def latest_closed_day(self, job: str) -> date | None:
        """Return the latest window day with a closed run of the job."""
        day: date | None = await self._db.fetchval(
            "read the latest ledger window",
            "SELECT max(window_day) FROM ledger_runs WHERE job = $1 AND closed_at IS NOT NULL",
            job,
        )
        return day

    async def days_with_runs(self, job: str, since: date) -> list[date]:
        """Return the window days since `since` that hold at least one run of the job."""
        recs = await self._db.fetch(
            "list ledger windows",
            "SELECT DISTINCT window_day FROM ledger_runs"
            " WHERE job = $1 AND window_day >= $2 ORDER BY 1",
            job,
            since,
        )
        return [r["window_day"] for r in recs]

    async def open_breach_days(self, job: str) -> list[date]:
        """Return the window days of the job with a breach that still holds."""
        recs = await self._db.fetch(
            "list open ledger breaches",
            "SELECT DISTINCT window_day FROM ledger_breaches WHERE job = $1 AND active ORDER BY 1",
            job,
        )
        return [r["window_day"] for r in recs]

    async def record_evaluation(
        self, job: str, day: date, due: bool, breaches: Mapping[Rule, str], now: datetime
    ) -> list[Rule]:
        """Store a window's verdict; return the rules that breach it for the first time."""
        async with self._db.transaction("record ledger breaches") as conn:
            await conn.execute(
                "INSERT INTO ledger_windows (job, window_day, due, evaluated_at)"
                " VALUES ($1, $2, $3, $4) ON CONFLICT (job, window_day)"
                " DO UPDATE SET due = EXCLUDED.due, evaluated_at = EXCLUDED.evaluated_at",
                job,
                day,
                due,
                now,
            )
            new: list[Rule] = []
            for rule, detail in sorted(breaches.items()):
                inserted = await conn.fetchval(
                    "INSERT INTO ledger_breaches (job, window_day, rule, detail, first_seen,"
                    " last_seen, active) VALUES ($1, $2, $3, $4, $5, $5, true)"
                    " ON CONFLICT (job, window_day, rule) DO UPDATE SET detail = EXCLUDED.detail,"
                    # An acknowledged breach stays acknowledged: it is not raised again.
                    " last_seen = EXCLUDED.last_seen,"
                    " active = ledger_breaches.acknowledged_at IS NULL"
                    " RETURNING (xmax = 0)",
                    job,
                    day,
                    rule,
                    detail,
                    now,
                )
                if inserted:
                    new.append(rule)
            await conn.execute(
                "UPDATE ledger_breaches SET active = false WHERE job = $1"
                " AND window_day = $2 AND active AND NOT (rule = ANY($3::text[]))",
                job,
                day,
                list(breaches),
            )
        return new

    async def breaches(
        self, job: str | None, *, active_only: bool = False, limit: int = 100, offset: int = 0
    ) -> list[BreachOut]:
        """Return recorded breaches, newest window first."""
        recs = await self._db.fetch(
            "list ledger breaches",
            f"SELECT {_BREACH_COLUMNS} FROM ledger_breaches"
            " WHERE ($1::text IS NULL OR job = $1)"
            " AND (active OR NOT $2) ORDER BY window_day DESC, job, rule"
            " LIMIT $3 OFFSET $4",
            job,
            active_only,
            limit,
            offset,
        )
        return [_breach_out(r) for r in recs]

    async def acknowledge(
        self, job: str, day: date, rule: str, ack: Acknowledge, now: datetime
    ) -> BreachOut:
        """Record who acknowledged a breach and why; it then no longer counts as open.

        Sending the same acknowledgement again returns it; a different one is a conflict.
        """
        async with self._db.transaction("acknowledge a ledger breach") as conn:
            rec = await conn.fetchrow(
                f"SELECT {_BREACH_COLUMNS} FROM ledger_breaches"
                " WHERE job = $1 AND window_day = $2 AND rule = $3 FOR UPDATE",
                job,
                day,
                rule,
            )
            if rec is None:
                raise BreachNotFound(f"no {rule} breach of job {job!r} on {day.isoformat()}")
            if rec["acknowledged_at"] is not None:
                if (rec["acknowledged_by"], rec["acknowledged_reason"]) == (ack.by, ack.reason):
                    return _breach_out(rec)
                raise LedgerConflict(
                    f"breach already acknowledged by {rec['acknowledged_by']!r} at"
                    f" {rec['acknowledged_at'].isoformat()}"
                )
            rec = await conn.fetchrow(
                "UPDATE ledger_breaches SET active = false, acknowledged_at = $4,"
                " acknowledged_by = $5, acknowledged_reason = $6"
                " WHERE job = $1 AND window_day = $2 AND rule = $3"
                f" RETURNING {_BREACH_COLUMNS}",
                job,
                day,
                rule,
                now,
                ack.by,
                ack.reason,
            )
            return _breach_out(rec)

    async def watched_since(self, job: str, now: datetime) -> datetime:
        """Return when the ledger began watching the job, recording `now` the first time."""
        async with self._db.transaction("record when a job is first watched") as conn:
            await conn.execute(
                "INSERT INTO ledger_jobs (job, watched_since) VALUES ($1, $2)"
                " ON CONFLICT (job) DO NOTHING",
                job,
                now,
            )
            since: datetime = await conn.fetchval(
                "SELECT watched_since FROM ledger_jobs WHERE job = $1", job
            )
            return since

    async def windows(self, job: str | None, limit: int = 30, offset: int = 0) -> list[WindowOut]:
        """Return evaluated windows, newest first, with the rules each breaches now."""
        recs = await self._db.fetch(
            "list ledger windows",
            "SELECT w.job, w.window_day, w.due, w.evaluated_at,"
            " coalesce(array_agg(b.rule ORDER BY b.rule) FILTER (WHERE b.rule IS NOT NULL),"
            "   '{}') AS breaches"
            " FROM ledger_windows w LEFT JOIN ledger_breaches b ON b.job = w.job"
            "   AND b.window_day = w.window_day AND b.active"
            " WHERE $1::text IS NULL OR w.job = $1"
            " GROUP BY w.job, w.window_day ORDER BY w.window_day DESC, w.job"
            " LIMIT $2 OFFSET $3",
            job,
            limit,
            offset,
        )
        return [
            WindowOut(
                job=r["job"],
                window_day=r["window_day"],
                due=r["due"],
                evaluated_at=r["evaluated_at"],
                breaches=list(r["breaches"]),
            )
            for r in recs
        ]

    async def keys(
        self, run_id: int, *, outcome: str | None = None, limit: int = 1000, offset: int = 0
    ) -> list[LedgerKeyOut]:
        """Return keys a run reported as no_match, skipped or failed."""
        recs = await self._db.fetch(
            "list ledger keys",
            "SELECT key, outcome, reason, batch_id FROM ledger_keys WHERE run_id = $1"
            " AND ($2::text IS NULL OR outcome = $2) ORDER BY id LIMIT $3 OFFSET $4",
            run_id,
            outcome,
            limit,
            offset,
        )
        return [LedgerKeyOut(**dict(r)) for r in recs]

    async def excused_keys(self, job: str, start: datetime, end: datetime) -> dict[str, str]:
        """Return key → reason for keys whose latest report, by runs over [start, end), excuses it.

        The latest report of a key wins: a key first reported no_match and later failed is
        not excused.
        """
        recs = await self._db.fetch(
            "read ledger exclusions",
            "SELECT key, reason FROM (SELECT DISTINCT ON (k.key) k.key, k.outcome, k.reason"
            "   FROM ledger_keys k JOIN ledger_runs r ON r.id = k.run_id"
            "   WHERE r.job = $1 AND r.window_start < $3 AND r.window_end > $2"
            "   ORDER BY k.key, k.id DESC) latest"
            " WHERE outcome IN ('no_match', 'skipped')",
            job,
            start,
            end,
            scale=3,
        )
        return {r["key"]: r["reason"] for r in recs}

    async def snapshot(self, jobs: list[str]) -> LedgerSnapshot:
        """Return the latest window verdicts and counts that the ledger metrics export."""
        latest, active, counts, runs, pruned = await self._db.fetch_each(
            "read ledger metrics", _SNAPSHOT_QUERIES, jobs
        )
        last: dict[str, datetime] = {}
        for r in runs:
            last[r["job"]] = max(last.get(r["job"], r["last"]), r["last"])
        breaches = {(r["job"], r["rule"]): r["n"] for r in counts}
        closed = {(r["job"], r["status"]): r["n"] for r in runs}
        for p in pruned:
            into = closed if p["series"] == "ledger_runs" else breaches
            into[(p["name"], p["label"])] = into.get((p["name"], p["label"]), 0) + p["n"]
        return LedgerSnapshot(
            latest_window={r["job"]: r["window_day"] for r in latest},
            open={(r["job"], r["rule"]): OpenBreaches(r["n"], r["oldest"]) for r in active},
            breaches=breaches,
            last_summary=last,
            runs=closed,
        )


def _breach_out(rec: Any) -> BreachOut:
    ack = (
        Acknowledgement(
            by=rec["acknowledged_by"], reason=rec["acknowledged_reason"], at=rec["acknowledged_at"]
        )
        if rec["acknowledged_at"] is not None
        else None
    )
    fields = ("job", "window_day", "rule", "detail", "first_seen", "last_seen", "active")
    return BreachOut(**{f: rec[f] for f in fields}, acknowledged=ack)


async def _runs_where(conn: Any, where: str, *args: Any) -> list[RunOut]:
    """Return the runs a WHERE clause (with its ORDER BY, LIMIT) picks, with outcomes, batches."""
    recs = await conn.fetch(f"SELECT {_RUN_COLUMNS} FROM ledger_runs WHERE {where}", *args)
    if not recs:
        return []
    ids = [r["id"] for r in recs]
    outs = await conn.fetch(
        "SELECT run_id, outcome, reason, rows FROM ledger_outcomes"
        " WHERE run_id = ANY($1::bigint[])",
        ids,
    )
    counts = await conn.fetch(
        "SELECT run_id, count(*) AS n FROM ledger_batches"
        " WHERE run_id = ANY($1::bigint[]) GROUP BY run_id",
        ids,
    )
    by_run: dict[int, list[Any]] = {}
    for o in outs:
        by_run.setdefault(o["run_id"], []).append(o)
    n_batches = {c["run_id"]: c["n"] for c in counts}
    return [_run_out(r, by_run.get(r["id"], []), n_batches.get(r["id"], 0)) for r in recs]


def _run_out(rec: Any, outcomes: list[Any], batches: int) -> RunOut:
    per: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    for o in outcomes:
        per[o["outcome"]] = per.get(o["outcome"], 0) + o["rows"]
        if o["reason"]:
            reasons.setdefault(o["outcome"], {})[o["reason"]] = o["rows"]
    return RunOut(
        **{name: rec[name] for name in _RUN_FIELDS},
        outcomes=_tally(per),
        reasons=reasons,
        summary=_summary(rec["summary"]),
        batches=batches,
    )
