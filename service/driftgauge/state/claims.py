"""Claim one scheduled time of a recurring job, so one replica of all those sharing the state
database runs it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta

from driftgauge.pg.calls import PgCalls

JobLock = Callable[[str], AbstractAsyncContextManager[bool]]
"""Hold a named job's lock across replicas; yield False if another replica holds it."""

# Claims older than this are deleted by the next claim of the same job.
KEEP = timedelta(days=7)


class JobClaims:
    """Exactly-once claims per (job, scheduled time) across replicas."""

    def __init__(self, calls: PgCalls, replica: str, lock: JobLock) -> None:
        self._db = calls
        self.replica = replica
        self.lock = lock
        """For jobs whose run may outlast their period (a canary): one at a time."""

    async def claim(self, job: str, scheduled_for: datetime) -> bool:
        """Return True if this replica took the job's run at `scheduled_for`, False if taken."""
        async with self._db.transaction("claim a scheduled job") as conn:
            got = await conn.fetchval(
                "INSERT INTO job_claims (job, scheduled_for, replica) VALUES ($1, $2, $3)"
                " ON CONFLICT DO NOTHING RETURNING true",
                job,
                scheduled_for,
                self.replica,
            )
            await conn.execute(
                "DELETE FROM job_claims WHERE job = $1 AND scheduled_for < $2",
                job,
                scheduled_for - KEEP,
            )
        return bool(got)

    async def claimed_by(self, job: str, scheduled_for: datetime) -> str | None:
        """Return the replica that claimed the job's run at `scheduled_for`, if any."""
        who: str | None = await self._db.fetchval(
            "read a job claim",
            "SELECT replica FROM job_claims WHERE job = $1 AND scheduled_for = $2",
            job,
            scheduled_for,
        )
        return who
