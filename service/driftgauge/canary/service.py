"""Run a check's canary and record the result (the job runtime schedules it)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from driftgauge.canary.keys import adapter_key_picker, query_key_picker
from driftgauge.canary.probe import CanaryResult, Connections, KeyPicker, run_canary
from driftgauge.canary.store import CanaryStore
from driftgauge.config.frozen import Check
from driftgauge.core.errors import DriftgaugeError
from driftgauge.served import FeatureService
from driftgauge.stores.base import KeyQuery, StoreAdapter

log = logging.getLogger("driftgauge.canary")
SourceGetter = Callable[[Check], Awaitable[StoreAdapter]]


def key_picker_for(check: Check, source: SourceGetter) -> KeyPicker:
    """Return how the check's canary picks a real key: its key_query, else the source view."""
    canary = check.canary
    query = canary.key_query if canary is not None else None

    async def pick(start: datetime, end: datetime) -> str | None:
        adapter = await source(check)
        if query is not None and isinstance(adapter, KeyQuery):
            return await query_key_picker(adapter, query)(start, end)
        return await adapter_key_picker(adapter)(start, end)

    return pick


@dataclass(eq=False)
class CanaryService(FeatureService[CanaryStore, StoreAdapter]):
    """Run and record canaries: on the job runtime's schedule, a deploy hook or by hand."""

    _: KW_ONLY
    on_result: Callable[[CanaryResult], Awaitable[None]] | None = None
    connections: Connections | None = None
    what = "a canary"

    @staticmethod
    def serves(check: Check) -> bool:
        """Return whether the check has a canary."""
        return check.canary is not None

    async def run(self, name: str) -> CanaryResult:
        """Run one check's canary now, record it and return the result."""
        check = self._checks.get(name)
        result = await run_canary(
            check,
            key_picker_for(check, self.source),
            now=self.clock(),
            connections=self.connections,
        )
        await self.store.record(result)
        log.log(
            logging.INFO if result.ok else logging.WARNING,
            "canary",
            extra={
                "check": name,
                "result": result.result,
                "detail": result.detail,
                "duration_seconds": round(result.duration, 3),
            },
        )
        if self.on_result is not None:
            await self.on_result(result)
        return result

    async def scheduled(self, name: str) -> None:
        """Run one check's canary for its schedule; a store or state failure is logged."""
        try:
            await self.run(name)
        except DriftgaugeError as exc:
            log.warning("canary could not be recorded", extra={"check": name, "error": str(exc)})
