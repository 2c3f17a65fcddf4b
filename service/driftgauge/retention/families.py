"""What retention may delete: rows past their age that nothing the service serves still reads."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime, timedelta

from driftgauge.config.frozen import Check, Config
from driftgauge.retention.batches import Family, Tally
from driftgauge.state.store import StateStore


def served_since(check: Check, now: datetime) -> date:
    """Return the first day bucket of the check's full-history window (or recent, if longer).

    The same days `runner.day_window` reconciles, so a full or recent run judges no day
    before it.
    """
    days = max(check.schedule.full_days, check.schedule.recent_days, 1)
    return now.astimezone(check.timezone).date() - timedelta(days=days - 1)


def ledger_since(checks: Mapping[str, Check], now: datetime) -> dict[str, datetime]:
    """Return per sync job the earliest window start its checks reconcile."""
    out: dict[str, datetime] = {}
    for check in checks.values():
        if check.ledger is None:
            continue
        first = served_since(check, now)
        start = datetime(first.year, first.month, first.day, tzinfo=check.timezone)
        job = check.ledger.job
        out[job] = min(out.get(job, start), start)
    return out


async def run_families(
    state: StateStore, checks: Mapping[str, Check], now: datetime, before: datetime
) -> list[Family]:
    """Return finished runs older than `before`, with their buckets, trees and samples.

    Kept at any age: running runs, and per configured check every run the API or /metrics
    may read (the latest one judging each day of the full-history window, and the latest
    run, finished, completed and successful).
    """
    served: set[int] = set()
    for check in checks.values():
        served |= await state.served_runs(check.name, served_since(check, now))
    return [
        Family(
            "runs",
            "status <> 'running' AND coalesce(finished_at, started_at) < $1"
            " AND NOT (id = ANY($2::bigint[]))",
            (before, sorted(served)),
            children=(("key_samples", "run_id"), ("nodes", "run_id"), ("buckets", "run_id")),
            tally=Tally("check_runs", "check_name", "status"),
        )
    ]


# The latest window of each job drives the breach gauges (LedgerStore.snapshot).
_LATEST_WINDOWS = (
    "(SELECT job, max(window_day) FROM ledger_windows WHERE job = ANY($2::text[]) GROUP BY job)"
)
# Windows of configured jobs with a breach still open: /metrics serves them and every
# ledger tick judges them again from their runs, so the window, its breaches and its runs
# stay until the breach closes.
_OPEN_WINDOWS = (
    "(SELECT DISTINCT job, window_day FROM ledger_breaches WHERE active AND job = ANY($2::text[]))"
)


def audit_families(config: Config, now: datetime, before: datetime) -> list[Family]:
    """Return ledger, canary and signals rows older than `before` that nothing reads.

    Kept at any age: ledger runs whose window overlaps a full-history window of a check
    they feed (the ledger exclusions read their keys), each job's latest closed run and
    latest judged window, every window with an open breach (with its runs), each canary
    check's latest and latest successful attempt, and
    the vocabulary and volume verdicts of what is configured now.
    """
    checks = config.checks
    since = ledger_since(checks, now)
    jobs = sorted(since)
    canaries = sorted(n for n, c in checks.items() if c.canary is not None)
    vocabulary = sorted((n, f.name) for n, c in checks.items() for f in c.vocabulary)
    volume = sorted(n for n, c in checks.items() if c.volume is not None)
    return [
        Family(
            "ledger_runs",
            "coalesce(closed_at, opened_at) < $1"
            " AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::timestamptz[]) AS n(job, since)"
            "   WHERE n.job = ledger_runs.job AND ledger_runs.window_end > n.since)"
            " AND id NOT IN (SELECT DISTINCT ON (job) id FROM ledger_runs"
            "   WHERE job = ANY($2::text[]) AND closed_at IS NOT NULL"
            "   ORDER BY job, closed_at DESC, id DESC)"
            f" AND (job, window_day) NOT IN {_OPEN_WINDOWS}",
            (before, jobs, [since[j] for j in jobs]),
            children=(
                ("ledger_keys", "run_id"),
                ("ledger_batches", "run_id"),
                ("ledger_outcomes", "run_id"),
            ),
            tally=Tally("ledger_runs", "job", "status"),
        ),
        # Before the windows: a breach stays exactly as long as its window does.
        Family(
            "ledger_breaches",
            f"(job, window_day) NOT IN {_OPEN_WINDOWS} AND last_seen < $1"
            " AND NOT EXISTS (SELECT 1 FROM ledger_windows w"
            "   WHERE w.job = ledger_breaches.job AND w.window_day = ledger_breaches.window_day"
            f"   AND (w.evaluated_at >= $1 OR (w.job, w.window_day) IN {_LATEST_WINDOWS}))",
            (before, jobs),
            tally=Tally("ledger_breaches", "job", "rule"),
        ),
        Family(
            "ledger_windows",
            f"evaluated_at < $1 AND (job, window_day) NOT IN {_LATEST_WINDOWS}"
            f" AND (job, window_day) NOT IN {_OPEN_WINDOWS}",
            (before, jobs),
        ),
        Family(
            "canary_results",
            "finished_at < $1 AND id NOT IN (SELECT DISTINCT ON (check_name) id"
            "   FROM canary_results WHERE check_name = ANY($2::text[])"
            "   ORDER BY check_name, finished_at DESC, id DESC)"
            " AND id NOT IN (SELECT DISTINCT ON (check_name) id FROM canary_results"
            "   WHERE check_name = ANY($2::text[]) AND result = 'ok'"
            "   ORDER BY check_name, finished_at DESC, id DESC)",
            (before, canaries),
            tally=Tally("canary_runs", "check_name", "result"),
        ),
        Family(
            "vocabulary_results",
            "computed_at < $1 AND (check_name, field) NOT IN"
            " (SELECT * FROM unnest($2::text[], $3::text[]))",
            (before, [c for c, _ in vocabulary], [f for _, f in vocabulary]),
        ),
        Family(
            "volume_results",
            "computed_at < $1 AND NOT (check_name = ANY($2::text[]))",
            (before, volume),
        ),
    ]
