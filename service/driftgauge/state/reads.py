"""Queries over stored runs: latest status, day buckets, drill-down nodes, sampled keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from driftgauge.core.paging import Page
from driftgauge.engine.result import Node
from driftgauge.pg.calls import PgCalls
from driftgauge.state import codec
from driftgauge.state.codec import StoredBucket, StoredKey
from driftgauge.state.payloads import CheckRun
from driftgauge.state.samples import EVERY_KEY, KeyFilter, KeysPage, key_total

_BUCKET_SELECT = (
    "SELECT DISTINCT ON (b.day) b.*, r.finished_at FROM buckets b"
    " JOIN runs r ON r.id = b.run_id"
    # A bucket in error (an unexplained difference) is served as it is:
    # an older verdict in its place would be a wrong answer, not a cautious one.
    " WHERE r.check_name = $1 AND r.complete"
)

_FIRST_KEYS = Page(100)
"""The page of sampled keys a read returns when it asks for none."""
# The check's latest run of each kind, as WHERE ... ORDER BY ... LIMIT 1 over its runs ($1).
# The API and /metrics read these, and retention keeps them: both read them from here.
_LATEST = {
    "started": "WHERE check_name = $1 ORDER BY started_at DESC, id DESC LIMIT 1",
    "finished": "WHERE check_name = $1 AND finished_at IS NOT NULL"
    " ORDER BY finished_at DESC, id DESC LIMIT 1",
    "completed": "WHERE check_name = $1 AND complete ORDER BY finished_at DESC, id DESC LIMIT 1",
    "success": "WHERE check_name = $1 AND complete AND status IN ('ok', 'drift')"
    " ORDER BY finished_at DESC, id DESC LIMIT 1",
}


class _Pinned:
    """A pool of one connection: every read made through it shares that connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        """Yield the one connection."""
        yield self._conn


class Reads:
    """Read queries of the state store; each runs under the store's deadline."""

    def __init__(self, pool: Any, timeout: float) -> None:
        self._pool = pool
        self._timeout = timeout
        self.calls = PgCalls(pool, timeout)
        """The pool under the store's deadline, for modules that own their SQL (retention)."""

    @asynccontextmanager
    async def snapshot(self, what: str, *, reads: int = 1) -> AsyncIterator[Reads]:
        """Yield reads that all see one state of the database, one after another.

        Reads on separate connections can straddle a commit (a run's interruption counted,
        its run not yet finished); one REPEATABLE READ transaction cannot. `reads` scales
        the deadline to the number of reads the block makes.
        """
        async with (
            self.calls.conn(what, scale=reads) as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield Reads(_Pinned(conn), self._timeout)

    async def latest_runs(self) -> dict[str, CheckRun]:
        """Return the most recently started run of every check (running or not)."""
        recs = await self.calls.fetch(
            "read the latest runs",
            f"SELECT DISTINCT ON (check_name) {codec.RUN_COLUMNS} FROM runs"
            " ORDER BY check_name, started_at DESC, id DESC",
        )
        return {r["check_name"]: codec.run_row(r) for r in recs}

    async def latest_finished_run(self, check: str) -> CheckRun | None:
        """Return the check's most recently finished run, failed or not."""
        return await self._one_run("read the latest finished run", _LATEST["finished"], check)

    async def latest_completed_run(self, check: str) -> CheckRun | None:
        """Return the check's most recent run whose results were stored."""
        return await self._one_run("read the latest completed run", _LATEST["completed"], check)

    async def latest_success(self, check: str) -> CheckRun | None:
        """Return the check's most recent completed run with no bucket in error."""
        return await self._one_run("read the latest successful run", _LATEST["success"], check)

    async def run(self, check: str, run_id: int) -> CheckRun | None:
        """Return one run of a check by id."""
        return await self._one_run("read a run", "WHERE check_name = $1 AND id = $2", check, run_id)

    async def runs(self, check: str, *, limit: int = 50, offset: int = 0) -> list[CheckRun]:
        """Return the check's runs, newest first, skipping the newest `offset`."""
        recs = await self.calls.fetch(
            "list runs",
            f"SELECT {codec.RUN_COLUMNS} FROM runs WHERE check_name = $1"
            " ORDER BY id DESC LIMIT $2 OFFSET $3",
            check,
            limit,
            offset,
        )
        return [codec.run_row(r) for r in recs]

    async def run_counts(self, check: str) -> dict[str, int]:
        """Return how many runs of the check ended in each status."""
        counts, _ = await self.run_totals(check)
        return counts

    async def trigger_times(self, check: str) -> dict[str, tuple[datetime, datetime | None]]:
        """Return per trigger when the check's latest run began and its latest one completed.

        The key "" holds the check's first stored run: a trigger with no run is judged
        against it (a schedule that never ran since the check began).
        """
        recs = await self.calls.fetch(
            "read the latest runs of each trigger",
            "SELECT trigger, max(started_at) AS started,"
            " max(finished_at) FILTER (WHERE complete) AS completed"
            " FROM runs WHERE check_name = $1 GROUP BY trigger"
            " UNION ALL SELECT '', min(started_at), NULL FROM runs WHERE check_name = $1",
            check,
        )
        return {r["trigger"]: (r["started"], r["completed"]) for r in recs if r["started"]}

    async def run_totals(self, check: str) -> tuple[dict[str, int], int]:
        """Return the check's runs per status and how many of them were interrupted."""
        async with self.calls.conn("count runs") as conn:
            # Runs deleted by retention still count: the runs counter must never go down.
            recs = await conn.fetch(
                "SELECT status, sum(n)::bigint AS n FROM ("
                " SELECT status, count(*) AS n FROM runs WHERE check_name = $1"
                "   AND status <> 'running' GROUP BY status"
                " UNION ALL SELECT label, n FROM pruned_counts"
                "   WHERE series = 'check_runs' AND name = $1) c GROUP BY status",
                check,
            )
            interrupted = await conn.fetchval(
                "SELECT n FROM run_interruptions WHERE check_name = $1", check
            )
        return {r["status"]: r["n"] for r in recs}, int(interrupted or 0)

    async def served_runs(self, check: str, since: date) -> set[int]:
        """Return the ids of the check's runs that the API and /metrics may still read.

        They are the latest run overall, finished, completed and successful, and for every
        day from `since` on the run `day_buckets` picks for it.
        """
        async with self.calls.conn("read the runs still served") as conn:
            days = await conn.fetch(
                f"{_BUCKET_SELECT} AND b.day >= $2 ORDER BY b.day, r.finished_at DESC, r.id DESC",
                check,
                since,
            )
            latest = await conn.fetchrow(
                "SELECT "
                + ", ".join(f"(SELECT id FROM runs {q}) AS {k}" for k, q in _LATEST.items()),
                check,
            )
        return {r["run_id"] for r in days} | {v for v in latest.values() if v is not None}

    async def _one_run(self, what: str, where: str, *args: Any) -> CheckRun | None:
        rec = await self.calls.fetchrow(
            what, f"SELECT {codec.RUN_COLUMNS} FROM runs {where}", *args
        )
        return codec.run_row(rec) if rec is not None else None

    async def day_buckets(
        self, check: str, since: date, until: date, tz: ZoneInfo | None = None
    ) -> list[StoredBucket]:
        """Return each day in [since, until] from the latest completed run that judged it."""
        recs = await self.calls.fetch(
            "read day buckets",
            f"{_BUCKET_SELECT} AND b.day BETWEEN $2 AND $3"
            " ORDER BY b.day, r.finished_at DESC, r.id DESC",
            check,
            since,
            until,
        )
        return [codec.bucket_from(r, tz) for r in recs]

    async def day_bucket(
        self, check: str, day: date, tz: ZoneInfo | None = None
    ) -> StoredBucket | None:
        """Return one day from the latest completed run that judged it."""
        found = await self.day_buckets(check, day, day, tz)
        return found[0] if found else None

    async def day_nodes(self, run_id: int, day: date) -> tuple[list[Node], list[Node]]:
        """Return a day's hour nodes (without children) and its day-wide prefix tree."""
        recs = await self.calls.fetch(
            "read a day's drill-down",
            "SELECT * FROM nodes WHERE run_id = $1 AND day = $2"
            " AND (level = 'hour' OR hour_start IS NULL) ORDER BY seq",
            run_id,
            day,
        )
        hours = codec.nodes_from([r for r in recs if r["level"] == "hour"])
        prefixes = codec.nodes_from([r for r in recs if r["level"] == "prefix"])
        return hours, prefixes

    async def hour_tree(self, run_id: int, day: date, hour_start: datetime) -> Node | None:
        """Return one stored hour node with its prefix subtree, or None if not stored."""
        recs = await self.calls.fetch(
            "read an hour's drill-down",
            "SELECT * FROM nodes WHERE run_id = $1 AND day = $2 AND hour_start = $3 ORDER BY seq",
            run_id,
            day,
            hour_start,
        )
        roots = [n for n in codec.nodes_from(recs) if n.level == "hour"]
        return roots[0] if roots else None

    async def keys(
        self, run_id: int, day: date, only: KeyFilter = EVERY_KEY, page: Page = _FIRST_KEYS
    ) -> tuple[int, list[StoredKey]]:
        """Return (total, one page) of a bucket's sampled differing keys, filtered."""
        where = (
            "run_id = $1 AND day = $2 AND ($3::text IS NULL OR kind = $3)"
            " AND ($4::text IS NULL OR starts_with(key_hash, $4))"
            " AND ($5::timestamptz IS NULL OR event_time >= $5)"
            " AND ($6::timestamptz IS NULL OR event_time < $6)"
        )
        args = (run_id, day, only.kind, only.prefix, only.start, only.end)
        async with self.calls.conn("read sampled keys") as conn:
            total = await conn.fetchval(f"SELECT count(*) FROM key_samples WHERE {where}", *args)
            recs = await conn.fetch(
                f"SELECT * FROM key_samples WHERE {where} ORDER BY kind, key LIMIT $7 OFFSET $8",
                *args,
                page.limit,
                page.offset,
            )
        return int(total), [codec.stored_key(r) for r in recs]

    async def bucket_keys(
        self, stored: StoredBucket, day: date, only: KeyFilter = EVERY_KEY, page: Page = _FIRST_KEYS
    ) -> KeysPage:
        """Return one page of a stored bucket's keys, with the total of keys its run found."""
        matched, keys = await self.keys(stored.run_id, day, only, page)
        recs = await self.calls.fetch(
            "count sampled keys",
            "SELECT kind, count(*) AS n FROM key_samples WHERE run_id = $1 AND day = $2"
            " GROUP BY kind",
            stored.run_id,
            day,
        )
        kept = {r["kind"]: int(r["n"]) for r in recs}
        total, sampled = key_total(stored.bucket, only.kind, kept, matched, filtered=only.narrows)
        return KeysPage(total, sampled, keys)
