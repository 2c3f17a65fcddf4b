"""Canary results in the state database, and the latest of them for the metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from driftgauge.canary.probe import CanaryResult
from driftgauge.pg.calls import PgCalls


@dataclass(frozen=True)
class CanarySnapshot:
    """What the canary metrics need: per check the latest attempt, last success and counts."""

    latest: dict[str, CanaryResult]
    last_success: dict[str, datetime]
    runs: dict[tuple[str, str], int]
    """Attempts per (check, result)."""


def _result(rec: Any) -> CanaryResult:
    return CanaryResult(
        rec["check_name"],
        rec["result"],
        rec["started_at"],
        rec["duration_seconds"],
        rec["key"],
        rec["detail"],
    )


class CanaryStore:
    """Record canary attempts; every call has a deadline."""

    def __init__(self, pool: Any, timeout: float = 10.0) -> None:
        self._db = PgCalls(pool, timeout)

    async def record(self, result: CanaryResult) -> int:
        """Store one attempt and return its id."""
        finished = result.started_at + timedelta(seconds=result.duration)
        rid: int = await self._db.fetchval(
            "record a canary",
            "INSERT INTO canary_results (check_name, started_at, finished_at, result,"
            " duration_seconds, key, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)"
            " RETURNING id",
            result.check,
            result.started_at,
            finished,
            result.result,
            result.duration,
            result.key,
            result.detail,
        )
        return rid

    async def history(self, check: str, limit: int = 20, offset: int = 0) -> list[CanaryResult]:
        """Return the check's latest attempts, newest first."""
        recs = await self._db.fetch(
            "read canary results",
            "SELECT * FROM canary_results WHERE check_name = $1"
            " ORDER BY finished_at DESC, id DESC LIMIT $2 OFFSET $3",
            check,
            limit,
            offset,
        )
        return [_result(r) for r in recs]

    async def snapshot(self, checks: Sequence[str]) -> CanarySnapshot:
        """Return the latest attempt, last success and attempt counts of every check."""
        names = list(checks)
        async with self._db.conn("read canary metrics") as conn:
            latest = await conn.fetch(
                "SELECT DISTINCT ON (check_name) * FROM canary_results"
                " WHERE check_name = ANY($1::text[])"
                " ORDER BY check_name, finished_at DESC, id DESC",
                names,
            )
            success = await conn.fetch(
                "SELECT check_name, max(finished_at) AS t FROM canary_results"
                " WHERE check_name = ANY($1::text[]) AND result = 'ok' GROUP BY check_name",
                names,
            )
            # Attempts deleted by retention still count: the counter must never go down.
            counts = await conn.fetch(
                "SELECT check_name, result, sum(n)::bigint AS n FROM ("
                " SELECT check_name, result, count(*) AS n FROM canary_results"
                "   WHERE check_name = ANY($1::text[]) GROUP BY check_name, result"
                " UNION ALL SELECT name, label, n FROM pruned_counts"
                "   WHERE series = 'canary_runs' AND name = ANY($1::text[])) c"
                " GROUP BY check_name, result",
                names,
            )
        return CanarySnapshot(
            latest={r["check_name"]: _result(r) for r in latest},
            last_success={r["check_name"]: r["t"] for r in success},
            runs={(r["check_name"], r["result"]): r["n"] for r in counts},
        )
