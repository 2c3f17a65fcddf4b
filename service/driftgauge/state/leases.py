"""Run leases in the state database: renew the runs a replica owns, expire the abandoned."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from driftgauge.pg.calls import PgCalls

# Runs begun before leases existed have no heartbeat; they expire only after this long.
LEGACY_EXPIRY = timedelta(hours=6)
INTERRUPTED = "interrupted"
"""The first word of the error of every run that stopped before it could finish."""
_COUNT = (
    "INSERT INTO run_interruptions (check_name, n)"
    " SELECT check_name, count(*) FROM gone GROUP BY check_name"
    " ON CONFLICT (check_name) DO UPDATE SET n = run_interruptions.n + EXCLUDED.n"
)


class RunLeases:
    """SQL of run ownership; all times compare against the database's clock, not ours."""

    def __init__(self, calls: PgCalls) -> None:
        self._db = calls

    async def renew(self, run_ids: Iterable[int]) -> set[int]:
        """Renew the heartbeat of these runs; return those still running."""
        ids = sorted(run_ids)
        if not ids:
            return set()
        recs = await self._db.fetch(
            "renew run leases",
            "UPDATE runs SET heartbeat_at = now()"
            " WHERE id = ANY($1::bigint[]) AND status = 'running' RETURNING id",
            ids,
        )
        return {r["id"] for r in recs}

    async def expire(self, lease: timedelta) -> list[tuple[int, str]]:
        """Mark every running run whose lease ran out `error: interrupted`; return them.

        Each interruption is counted once per check even when replicas expire at the same
        time: the second UPDATE re-reads the row and finds it no longer running.
        """
        recs = await self._db.fetch(
            "expire run leases",
            "WITH gone AS (UPDATE runs SET status = 'error', complete = false,"
            "   finished_at = now(), duration_seconds = extract(epoch FROM now() - started_at),"
            f"   error = '{INTERRUPTED}: replica ' || replica || ' stopped renewing its lease"
            " (last heartbeat ' || coalesce(to_char(heartbeat_at AT TIME ZONE 'UTC',"
            "     'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), 'never') || ')'"
            "   WHERE status = 'running' AND CASE WHEN heartbeat_at IS NULL"
            "     THEN started_at < now() - $2::interval"
            "     ELSE heartbeat_at < now() - $1::interval END"
            "   RETURNING id, check_name),"
            f" counted AS ({_COUNT})"
            " SELECT id, check_name FROM gone ORDER BY id",
            lease,
            LEGACY_EXPIRY,
        )
        return [(r["id"], r["check_name"]) for r in recs]

    async def interrupt(
        self, run_id: int, reason: str, *, finished_at: datetime, duration: float | None
    ) -> bool:
        """Fail one running run as interrupted (`reason` follows the word); count it."""
        rec = await self._db.fetchval(
            "record an interrupted run",
            "WITH gone AS (UPDATE runs SET status = 'error', complete = false,"
            "   finished_at = $3, error = $2,"
            "   duration_seconds = coalesce($4, extract(epoch FROM $3 - started_at))"
            "   WHERE id = $1 AND status = 'running' RETURNING id, check_name),"
            f" counted AS ({_COUNT})"
            " SELECT id FROM gone",
            run_id,
            f"{INTERRUPTED}: {reason}",
            finished_at,
            duration,
        )
        return rec is not None

    async def interrupted(self, check: str) -> int:
        """Return how many runs of the check were ever interrupted."""
        n = await self._db.fetchval(
            "count interrupted runs", "SELECT n FROM run_interruptions WHERE check_name = $1", check
        )
        return int(n or 0)
