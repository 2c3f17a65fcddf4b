"""The six detectors, scored: when each first raised an alarm, and the stored result behind it.

The three classic alarms are computed from the job's own outputs (its exit, its summary
line, its writes) and the dashboard probe, as the seed defines them. Canary, ledger and
reconciliation are read back from driftgauge's state database: canary attempts, ledger
breaches and reconciliation runs with their day buckets, each with its id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from faults.scenario import Classic, Simulation
from faults.syncjob import JOB
from faults.world import TIMEOUT

FRESHNESS = timedelta(hours=36)
CLASSIC = ("error_rate", "status", "freshness")
DETECTORS = (*CLASSIC, "canary", "ledger", "reconciliation")
STATE = '"driftgauge"'
"""The state schema every scenario's config names."""


@dataclass
class Alarm:
    """A detector's first alarm: when, and what driftgauge (or the job) recorded."""

    at: datetime
    ref: dict[str, Any]

    def hours_after(self, onset: datetime) -> float:
        """Return the hours from `onset` to this alarm."""
        return (self.at - onset).total_seconds() / 3600


@dataclass
class Outcome:
    """One scenario's first alarm per detector (absent: never fired) and its counts."""

    scenario: str
    fault: str
    onset: datetime
    since: datetime
    """Alarms count from here (onset, or the first day for the healthy baseline)."""
    end: datetime
    alarms: dict[str, Alarm] = field(default_factory=dict)
    checks: dict[str, Alarm] = field(default_factory=dict)
    """First alarm of every reconciliation check (the full one and each variant)."""
    drifted_days: dict[str, int] = field(default_factory=dict)
    """Per check: distinct day buckets some run judged drift."""
    judged_days: dict[str, int] = field(default_factory=dict)
    """Per check: distinct day buckets with rows some run judged (ok or drift)."""
    first_affected_run: datetime | None = None
    first_report: str = ""
    """What the first sync run after onset printed."""
    reconcile_seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    """How often each driftgauge detector was asked (and answered) over the judged span."""

    def hours(self, detector: str) -> float | None:
        """Return the hours from onset to a detector's first alarm, None if it never fired."""
        alarm = self.alarms.get(detector) or self.checks.get(detector)
        return alarm.hours_after(self.onset) if alarm is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Return the outcome as a JSON-ready dict."""

        def alarm(a: Alarm) -> dict[str, Any]:
            return {"at": a.at.isoformat(), "hours": round(a.hours_after(self.onset), 2), **a.ref}

        return {
            "scenario": self.scenario,
            "fault": self.fault,
            "onset": self.onset.isoformat(),
            "since": self.since.isoformat(),
            "end": self.end.isoformat(),
            "first_affected_run": (
                self.first_affected_run.isoformat() if self.first_affected_run else None
            ),
            "first_report": self.first_report,
            "alarms": {k: alarm(v) for k, v in self.alarms.items()},
            "checks": {k: alarm(v) for k, v in self.checks.items()},
            "drifted_days": self.drifted_days,
            "judged_days": self.judged_days,
            "counts": self.counts,
            "reconcile_seconds": round(self.reconcile_seconds, 2),
        }


def classic_alarms(classic: Classic, since: datetime, end: datetime) -> dict[str, Alarm]:
    """Return the first error-rate, status and freshness alarms at or after `since`."""
    out: dict[str, Alarm] = {}
    errors = [
        (
            r.finished_at,
            {
                "source": "job",
                "day": r.day,
                "copy": r.copy,
                "detail": "killed by the runtime (time budget)",
            },
        )
        for r in classic.jobs
        if r.killed
    ]
    errors += [(t, {"source": "dashboard probe", "detail": why}) for t, why in classic.probes]
    first = min((e for e in errors if e[0] >= since), key=lambda e: e[0], default=None)
    if first is not None:
        out["error_rate"] = Alarm(first[0], first[1])
    bad = [
        r
        for r in classic.jobs
        if r.status in ("failed", "partial_failure") and r.finished_at >= since
    ]
    if bad:
        r = min(bad, key=lambda r: r.finished_at)
        out["status"] = Alarm(
            r.finished_at, {"source": "job summary line", "day": r.day, "line": r.line}
        )
    stale = freshness_alarm(
        sorted(r.last_write_at for r in classic.jobs if r.last_write_at is not None), since, end
    )
    if stale is not None:
        out["freshness"] = stale
    return out


def freshness_alarm(writes: list[datetime], since: datetime, end: datetime) -> Alarm | None:
    """Return the first moment in [since, end] with no successful write for 36 h."""
    for i, last in enumerate(writes):
        fires = last + FRESHNESS
        following = writes[i + 1] if i + 1 < len(writes) else None
        if (following is None or following > fires) and since <= fires <= end:
            return Alarm(
                fires,
                {"source": "job writes", "detail": f"last successful write {last.isoformat()}"},
            )
    return None


async def canary_alarm(sim: Simulation, since: datetime) -> Alarm | None:
    """Return driftgauge's first failed canary attempt at or after `since`."""
    async with sim.tasks_pool.acquire() as conn:
        rec = await conn.fetchrow(
            f"SELECT id, started_at, result, detail FROM {STATE}.canary_results"
            " WHERE result <> 'ok' AND started_at >= $1 ORDER BY started_at, id LIMIT 1",
            since,
            timeout=TIMEOUT,
        )
    if rec is None:
        return None
    return Alarm(
        rec["started_at"],
        {"canary_result_id": rec["id"], "result": rec["result"], "detail": rec["detail"]},
    )


async def ledger_alarm(sim: Simulation, since: datetime) -> Alarm | None:
    """Return driftgauge's first ledger breach(es) at or after `since`."""
    breaches = [
        b for b in await sim.ledger_store.breaches(JOB, limit=1000) if b.first_seen >= since
    ]
    if not breaches:
        return None
    first = min(b.first_seen for b in breaches)
    hit = sorted((b for b in breaches if b.first_seen == first), key=lambda b: b.rule)
    return Alarm(
        first,
        {
            "breaches": [
                {
                    "job": b.job,
                    "window_day": b.window_day.isoformat(),
                    "rule": b.rule,
                    "detail": b.detail,
                }
                for b in hit
            ]
        },
    )


async def check_alarm(sim: Simulation, check: str, since: datetime) -> Alarm | None:
    """Return the first stored reconciliation run of a check with a drifting day bucket."""
    runs = [
        r
        for r in await sim.state.runs(check, limit=10_000)
        if r.status == "drift" and r.started_at >= since
    ]
    if not runs:
        return None
    run = min(runs, key=lambda r: (r.started_at, r.id))
    async with sim.tasks_pool.acquire() as conn:
        recs = await conn.fetch(
            "SELECT day, expected, visible, excluded, missing, extra, mismatched, reasons"
            f" FROM {STATE}.buckets WHERE run_id = $1 AND status = 'drift' ORDER BY day",
            run.id,
            timeout=TIMEOUT,
        )
    buckets = [
        {
            "day": r["day"].isoformat(),
            "expected": r["expected"],
            "visible": r["visible"],
            "excluded": _json(r["excluded"]),
            "missing": r["missing"],
            "extra": r["extra"],
            "mismatched": r["mismatched"],
            "reasons": _json(r["reasons"]),
        }
        for r in recs
    ]
    return Alarm(
        run.started_at,
        {
            "run_id": run.id,
            "trigger": run.trigger,
            "window": [run.window_start.isoformat(), run.window_end.isoformat()],
            "drifting_buckets": len(buckets),
            "first_buckets": buckets[:3],
        },
    )


async def day_counts(sim: Simulation, check: str, since: datetime) -> tuple[int, int]:
    """Return (day buckets judged drift, day buckets judged) by the check's runs since `since`."""
    async with sim.tasks_pool.acquire() as conn:
        rec = await conn.fetchrow(
            "SELECT count(DISTINCT b.day) FILTER (WHERE b.status = 'drift') AS drift,"
            " count(DISTINCT b.day) FILTER (WHERE b.status IN ('ok', 'drift')"
            "   AND (b.expected > 0 OR b.visible > 0)) AS judged"
            f" FROM {STATE}.buckets b JOIN {STATE}.runs r ON r.id = b.run_id"
            " WHERE r.check_name = $1 AND r.started_at >= $2",
            check,
            since,
            timeout=TIMEOUT,
        )
    return int(rec["drift"]), int(rec["judged"])


async def score(
    sim: Simulation,
    scenario: str,
    fault: str,
    onset: datetime,
    since: datetime,
    end: datetime,
    damage: float = 0.0,
) -> Outcome:
    """Return the scenario's first alarm per detector (alarms from `since` to `end`).

    `damage`: hours from onset to the fault's first harm; the first sync run from then on
    is the one whose summary line is kept.
    """
    out = Outcome(scenario, fault, onset, since, end, reconcile_seconds=sim.reconcile_seconds)
    out.alarms.update(classic_alarms(sim.classic, since, end))
    for name, found in (
        ("canary", await canary_alarm(sim, since)),
        ("ledger", await ledger_alarm(sim, since)),
    ):
        if found is not None:
            out.alarms[name] = found
    for check in sorted(sim.config.checks):
        found = await check_alarm(sim, check, since)
        if found is not None:
            out.checks[check] = found
        out.drifted_days[check], out.judged_days[check] = await day_counts(sim, check, since)
    main = out.checks.get("reviews")
    if main is not None:
        out.alarms["reconciliation"] = main
    harm = onset + timedelta(hours=damage) - timedelta(minutes=1)
    affected = [r for r in sim.classic.jobs if r.started_at >= harm]
    out.first_affected_run = min((r.started_at for r in affected), default=None)
    first = [r for r in affected if r.started_at == out.first_affected_run]
    if first:
        said = first[0].line or "killed by the runtime: no summary line"
        out.first_report = f"{len(first)} copies, each: {said}" if len(first) > 1 else said
    out.counts = await _counts(sim, since)
    out.counts["sync_runs"] = len([r for r in sim.classic.jobs if r.started_at >= since])
    return out


async def _counts(sim: Simulation, since: datetime) -> dict[str, int]:
    """Return attempts and alarms per driftgauge detector since `since` (stored results)."""
    async with sim.tasks_pool.acquire() as conn:
        rec = await conn.fetchrow(
            f"SELECT (SELECT count(*) FROM {STATE}.canary_results WHERE started_at >= $1)"
            "   AS canary_runs,"
            f" (SELECT count(*) FROM {STATE}.canary_results WHERE started_at >= $1"
            "   AND result <> 'ok') AS canary_failed,"
            f" (SELECT count(*) FROM {STATE}.ledger_windows WHERE window_day >= $2)"
            "   AS ledger_windows,"
            f" (SELECT count(*) FROM {STATE}.ledger_breaches WHERE first_seen >= $1)"
            "   AS ledger_breaches,"
            f" (SELECT count(*) FROM {STATE}.runs WHERE check_name = 'reviews'"
            "   AND started_at >= $1) AS recon_runs,"
            f" (SELECT count(*) FROM {STATE}.runs WHERE check_name = 'reviews'"
            "   AND started_at >= $1 AND status = 'drift') AS recon_drift_runs,"
            f" (SELECT count(*) FROM {STATE}.runs WHERE check_name = 'reviews'"
            "   AND started_at >= $1 AND status = 'error') AS recon_failed_runs",
            since,
            since.date(),
            timeout=TIMEOUT,
        )
    return {k: int(v) for k, v in dict(rec).items()}


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
