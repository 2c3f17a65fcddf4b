"""The exporter election: one replica on a state database holds a session advisory lock."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg

from driftgauge.pg import calls, errors

log = logging.getLogger("driftgauge.state")
# A session the server ended can leave the driver mid-operation: that too is a lost lock.
LOST = (*errors.DRIVER_ERRORS, asyncpg.InternalClientError)


class ExporterElection:
    """This replica's side of the election, on a dedicated connection to the state database.

    The lock lives as long as the connection: a replica that dies (kill -9, lost node) loses
    it with its connection, and the next attempt of another replica takes it over.
    """

    def __init__(self, dsn: str, key: int, *, timeout: float) -> None:
        self._dsn = dsn
        self._key = key
        self._timeout = timeout
        self._conn: Any = None
        self._held = False
        """Whether the lock is held on the current connection (a new one holds nothing)."""
        self.leader = False
        """Whether this replica exports the stored series (the last known answer)."""

    async def attempt(self) -> bool:
        """Take the lock if it is free, or make sure the held one is still ours; return leader.

        When the state database does not answer, the last answer stands (a leader keeps
        exporting its last values, which driftgauge_state_up says are stale) and StateError
        is raised for the caller to log.
        """
        try:
            async with asyncio.timeout(self._timeout):
                if self._conn is None:
                    self._conn = await calls.session(
                        self._dsn, self._timeout, "driftgauge-exporter"
                    )
                if self._held:
                    # The server keeps the lock while this connection answers.
                    await self._conn.fetchval("SELECT 1")
                else:
                    got = await self._conn.fetchval("SELECT pg_try_advisory_lock($1)", self._key)
                    self._held = bool(got)
                    self._change(self._held)
        except LOST as exc:
            await self._drop()
            raise errors.state_error("hold the exporter lock", exc, self._timeout) from None
        return self.leader

    def _change(self, leader: bool) -> None:
        if leader != self.leader:
            log.info("exporter role changed", extra={"leader": leader})
        self.leader = leader

    async def _drop(self) -> None:
        """Forget a broken connection; the server drops its lock with it."""
        conn, self._conn, self._held = self._conn, None, False
        if conn is not None:
            conn.terminate()

    async def release(self) -> None:
        """Give the lock up (on shutdown), so another replica takes it at its next attempt."""
        conn, self._conn = self._conn, None
        held, self._held, self.leader = self._held, False, False
        if conn is None:
            return
        try:
            if held:
                await conn.execute(
                    "SELECT pg_advisory_unlock($1)", self._key, timeout=self._timeout
                )
        except LOST:
            pass  # closing the session below releases it anyway
        finally:
            await calls.close_session(conn, self._timeout)
