"""Run each check's canary on its schedule and record the results."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.interval import IntervalTrigger

from driftgauge.canary.keys import adapter_key_picker, sql_key_picker
from driftgauge.canary.probe import CanaryResult, KeyPicker, run_canary
from driftgauge.canary.store import CanaryStore
from driftgauge.config.runtime import Check, PostgresStore
from driftgauge.core.errors import DriftgaugeError, UnknownCheck
from driftgauge.cron import trigger_for
from driftgauge.jobs.background import survive
from driftgauge.jobs.clock import EPOCH, utc_now
from driftgauge.jobs.schedule import JobSpec
from driftgauge.state.claims import JobClaims
from driftgauge.stores.base import StoreAdapter

log = logging.getLogger("driftgauge.canary")
SourceGetter = Callable[[Check], Awaitable[StoreAdapter]]


def key_picker_for(check: Check, source: SourceGetter) -> KeyPicker:
    """Return how the check's canary picks a real key: its key_query, else the source view."""
    canary = check.canary
    if canary is not None and canary.key_query is not None \
            and isinstance(check.source.store, PostgresStore):
        return sql_key_picker(check.source.store, canary.key_query)

    async def pick(start: datetime, end: datetime) -> str | None:
        return await adapter_key_picker(await source(check))(start, end)
    return pick


def canary_trigger(check: Check) -> BaseTrigger:
    """Return the APScheduler trigger of a check's canary."""
    canary = check.canary
    if canary is None:
        raise ValueError(f"check {check.name!r} has no canary")
    if canary.every is not None:
        return IntervalTrigger(seconds=canary.every.total_seconds(), start_date=EPOCH,
                               timezone=UTC)
    return trigger_for(canary.cron or "0 12 * * *", check.timezone)


def scheduled_time(check: Check, now: datetime) -> datetime | None:
    """Return the canary's latest scheduled time at or before `now` (same grid as ticks)."""
    canary = check.canary
    if canary is None:
        return None
    cron = None if canary.every is not None else (canary.cron or "0 12 * * *")
    return JobSpec(check.name, "recent", every=canary.every, cron=cron,
                   timezone=check.timezone).latest_fire(now)


class CanaryService:
    """Own the canary schedule; `run(check)` also serves a deploy hook or a manual trigger."""

    def __init__(self, checks: Mapping[str, Check], store: CanaryStore, source: SourceGetter,
                 *, clock: Callable[[], datetime] = utc_now,
                 on_result: Callable[[CanaryResult], Awaitable[None]] | None = None,
                 claims: JobClaims | None = None) -> None:
        self._checks = {n: c for n, c in checks.items() if c.canary is not None}
        self._claims = claims
        self.store = store
        self._source = source
        self._clock = clock
        self._on_result = on_result
        self._aps: AsyncIOScheduler | None = None

    @property
    def checks(self) -> list[str]:
        """Return the names of the checks that have a canary."""
        return sorted(self._checks)

    def start(self) -> None:
        """Schedule every canary on the running event loop."""
        aps = AsyncIOScheduler(timezone=UTC)
        for name, check in sorted(self._checks.items()):
            aps.add_job(self._fire, trigger=canary_trigger(check), args=[name],
                        id=f"{name}:canary", name=f"{name}:canary", max_instances=1,
                        coalesce=True, misfire_grace_time=300, replace_existing=True)
        aps.start()
        self._aps = aps

    def stop(self) -> None:
        """Stop scheduling canaries."""
        if self._aps is not None and self._aps.running:
            self._aps.shutdown(wait=False)
        self._aps = None

    async def run(self, name: str) -> CanaryResult:
        """Run one check's canary now, record it and return the result."""
        check = self._checks.get(name)
        if check is None:
            raise UnknownCheck(f"no check named {name!r} has a canary")
        result = await run_canary(check, key_picker_for(check, self._source), now=self._clock())
        await self.store.record(result)
        log.log(logging.INFO if result.ok else logging.WARNING, "canary",
                extra={"check": name, "result": result.result, "detail": result.detail,
                       "duration_seconds": round(result.duration, 3)})
        if self._on_result is not None:
            await self._on_result(result)
        return result

    async def claim(self, name: str) -> bool:
        """Return True if this replica takes the canary's current scheduled time.

        Every replica fires the same schedule and they share one sentinel id, so only the
        one that claims the time may write it: two writers would read back each other's
        token and raise false alarms.
        """
        check = self._checks[name]
        fire = scheduled_time(check, self._clock())
        if self._claims is None or fire is None:
            return True
        if await self._claims.claim(f"canary:{name}", fire):
            return True
        log.info("canary skipped: another replica runs it",
                 extra={"check": name, "scheduled_for": fire.isoformat()})
        return False

    async def _fire(self, name: str) -> None:
        with survive("canary", name, check=name):
            try:
                await self._claimed_run(name)
            except DriftgaugeError as exc:
                log.warning("canary could not be recorded", extra={"check": name,
                                                                    "error": str(exc)})

    async def _claimed_run(self, name: str) -> None:
        if self._claims is None:
            await self.run(name)
            return
        # An attempt that outlasts the period must not meet the next one on another
        # replica: both would write the one sentinel. A time skipped so is not claimed.
        async with self._claims.lock(f"canary:{name}") as got:
            if not got:
                log.warning("canary skipped: the previous attempt still runs",
                            extra={"check": name})
                return
            if await self.claim(name):
                await self.run(name)
