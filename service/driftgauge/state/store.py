"""The state database: runs, day buckets, drill-down trees and key samples, in one schema."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from driftgauge.config.frozen import State
from driftgauge.core.errors import StateError
from driftgauge.engine.result import RunResult
from driftgauge.pg import calls, errors, pools
from driftgauge.state import codec, migrate
from driftgauge.state.claims import JobClaims
from driftgauge.state.costs import StoreCosts
from driftgauge.state.election import ExporterElection
from driftgauge.state.leases import RunLeases
from driftgauge.state.reads import Reads

KeyHasher = Callable[[str], str | None]


def default_replica() -> str:
    """Return an id for this process: host, pid and a random tag."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class StateStore(Reads):
    """Driftgauge's own results in a PostgreSQL schema; every call has a deadline."""

    def __init__(self, pool: Any, dsn: str, schema: str, *, timeout: float, replica: str) -> None:
        super().__init__(pool, timeout)
        self._dsn = dsn
        self.schema = schema
        self.replica = replica
        self.leases = RunLeases(self.calls)
        self.claims = JobClaims(self.calls, replica, self.job_lock)
        self.costs = StoreCosts(self.calls)
        self.owned: set[int] = set()
        """Runs this process began and has not finished: the ones its heartbeat renews."""

    @classmethod
    async def open(
        cls, state: State, *, deadline: float = 10.0, pool_max: int = 4, replica: str | None = None
    ) -> StateStore:
        """Connect, apply pending migrations and return the store; raise StateError if not.

        `deadline` bounds every call in seconds (migrations get a few times longer).
        """
        timeout = deadline
        pool = await pools.open_pool(
            state, deadline=timeout, pool_max=pool_max, application="driftgauge"
        )
        store = cls(
            pool,
            state.dsn.reveal(),
            state.schema,
            timeout=timeout,
            replica=replica or default_replica(),
        )
        try:
            await store.migrate()
        except BaseException:
            await store.close()
            raise
        return store

    async def migrate(self) -> list[int]:
        """Apply pending migrations; return the versions applied by this call."""
        async with self.calls.conn("apply migrations", scale=6) as conn:
            return await migrate.apply(conn, self.schema)

    async def close(self) -> None:
        """Close the pool, waiting a bounded time for connections in use."""
        try:
            await asyncio.wait_for(self._pool.close(), self._timeout)
        except TimeoutError:
            self._pool.terminate()

    async def ping(self) -> None:
        """Raise StateError unless the state database answers."""
        await self.calls.fetchval("ping", "SELECT 1")

    async def begin_run(
        self,
        check: str,
        window_start: datetime,
        window_end: datetime,
        *,
        trigger: str,
        started_at: datetime | None = None,
    ) -> int:
        """Insert a run as `running` and return its id."""
        run_id: int = await self.calls.fetchval(
            "begin a run",
            "INSERT INTO runs (check_name, trigger, window_start, window_end, started_at,"
            " replica, heartbeat_at) VALUES ($1, $2, $3, $4, $5, $6, now()) RETURNING id",
            check,
            trigger,
            window_start,
            window_end,
            started_at or datetime.now(UTC),
            self.replica,
        )
        self.owned.add(run_id)
        return run_id

    async def claim_tick(
        self,
        check: str,
        window_start: datetime,
        window_end: datetime,
        *,
        trigger: str,
        scheduled_for: datetime,
        started_at: datetime,
        guard: timedelta,
    ) -> int | None:
        """Insert a run for one scheduled tick unless a replica already took it.

        Returns None when a run of this tick exists, or when a run of the same check and
        trigger started within `guard` before `started_at` (replicas whose clocks disagree).
        """
        run_id: int | None = await self.calls.fetchval(
            "claim a scheduled tick",
            "INSERT INTO runs (check_name, trigger, window_start, window_end, scheduled_for,"
            " started_at, replica, heartbeat_at)"
            " SELECT $1, $2, $3, $4, $5, $6, $7, now()"
            " WHERE NOT EXISTS (SELECT 1 FROM runs WHERE check_name = $1 AND trigger = $2"
            "   AND started_at > $6::timestamptz - $8::interval"
            "   AND started_at <= $6::timestamptz + $8::interval)"
            " ON CONFLICT DO NOTHING RETURNING id",
            check,
            trigger,
            window_start,
            window_end,
            scheduled_for,
            started_at,
            self.replica,
            guard,
        )
        if run_id is not None:
            self.owned.add(run_id)
        return run_id

    async def complete_run(
        self,
        run_id: int,
        result: RunResult,
        *,
        duration: float | None = None,
        sample_keys: int | None = None,
        key_hash: KeyHasher | None = None,
    ) -> None:
        """Write buckets, tree and samples and mark the run finished, in one transaction.

        `sample_keys` caps the stored keys per bucket and kind; `key_hash` gives a key's hash
        when the engine's key diffs do not carry it (for filtering keys by prefix).
        """
        finished = result.finished_at or datetime.now(UTC)
        buckets = [codec.bucket_row(run_id, b, None) for b in result.buckets]
        nodes = [
            rec
            for b in result.buckets
            for rec in codec.node_records(run_id, b.start.date(), b.tree)
        ]
        samples = [
            rec
            for b in result.buckets
            for rec in codec.sample_records(
                run_id, b.start.date(), b.samples, sample_keys, key_hash
            )
        ]
        status = result.status
        async with self.calls.conn("complete a run", scale=3) as conn, conn.transaction():
            flipped = await conn.fetchval(
                "UPDATE runs SET status = $2, complete = true, finished_at = $3,"
                " duration_seconds = coalesce($4, extract(epoch FROM $3 - started_at)),"
                " queries = $5, rows_fetched = $6, error = NULL, row_hash = $7"
                " WHERE id = $1 AND status = 'running' RETURNING id",
                run_id,
                status,
                finished,
                duration,
                result.queries,
                result.rows_fetched,
                result.row_hash,
            )
            if flipped is None:
                raise StateError(f"run {run_id} is not running (finished or abandoned)")
            if buckets:
                # Each parameter takes its column's type: the rows name their columns.
                columns = list(buckets[0])
                params = ", ".join(f"${n}" for n in range(1, len(columns) + 1))
                await conn.executemany(
                    f"INSERT INTO buckets ({', '.join(columns)}) VALUES ({params})",
                    [tuple(b.values()) for b in buckets],
                )
            if nodes:
                await conn.copy_records_to_table(
                    "nodes", records=nodes, columns=codec.NODE_COLUMNS, schema_name=self.schema
                )
            if samples:
                await conn.copy_records_to_table(
                    "key_samples",
                    records=samples,
                    columns=codec.SAMPLE_COLUMNS,
                    schema_name=self.schema,
                )

    async def fail_run(
        self,
        run_id: int,
        error: str,
        *,
        finished_at: datetime | None = None,
        duration: float | None = None,
        queries: int = 0,
        rows_fetched: int = 0,
    ) -> None:
        """Mark a running run as failed with its error; its buckets are never written."""
        await self.calls.execute(
            "record a failed run",
            "UPDATE runs SET status = 'error', complete = false, finished_at = $3,"
            " duration_seconds = coalesce($4, extract(epoch FROM $3 - started_at)),"
            " error = $2, queries = $5, rows_fetched = $6"
            " WHERE id = $1 AND status = 'running'",
            run_id,
            error,
            finished_at or datetime.now(UTC),
            duration,
            queries,
            rows_fetched,
        )

    async def abandon_stale(self, started_before: datetime, reason: str) -> int:
        """Fail runs still `running` that started before a cutoff; return how many."""
        done = await self.calls.fetch(
            "abandon stale runs",
            "UPDATE runs SET status = 'error', error = $2, finished_at = now()"
            " WHERE status = 'running' AND started_at < $1 RETURNING id",
            started_before,
            reason,
        )
        return len(done)

    def check_lock(self, check: str) -> AbstractAsyncContextManager[bool]:
        """Hold this check's advisory lock on a dedicated connection; yield False if taken."""
        return self._session_lock(
            migrate.lock_key("check", self.schema, check), f"the lock of check {check!r}"
        )

    def job_lock(self, job: str) -> AbstractAsyncContextManager[bool]:
        """Hold a recurring job's advisory lock on a dedicated connection; yield False if taken."""
        return self._session_lock(
            migrate.lock_key("job", self.schema, job), f"the lock of job {job!r}"
        )

    def exporter_election(self) -> ExporterElection:
        """Return this replica's side of the schema's exporter election (not yet attempted)."""
        return ExporterElection(
            self._dsn, migrate.lock_key("exporter", self.schema), timeout=self._timeout
        )

    def prune_lock(self) -> AbstractAsyncContextManager[bool]:
        """Hold the schema's retention lock on a dedicated connection; yield False if taken."""
        return self._session_lock(migrate.lock_key("prune", self.schema), "the retention lock")

    @asynccontextmanager
    async def _session_lock(self, key: int, what: str) -> AsyncIterator[bool]:
        try:
            async with asyncio.timeout(self._timeout):
                conn = await calls.session(self._dsn, self._timeout, "driftgauge-lock")
                got = bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", key))
        except errors.DRIVER_ERRORS as exc:
            raise errors.state_error(f"take {what}", exc, self._timeout) from None
        try:
            yield got
        finally:
            # Closing the session releases the lock even if the unlock cannot be sent.
            try:
                if got:
                    await conn.execute("SELECT pg_advisory_unlock($1)", key, timeout=self._timeout)
            except errors.DRIVER_ERRORS:
                pass
            finally:
                await calls.close_session(conn, self._timeout)
