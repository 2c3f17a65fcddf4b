"""Safe repair opened by the lifespan: on the state pool and store adapters, its judge jobs on
the runtime. The repair router only serves HTTP."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from driftgauge.config.frozen import Config
from driftgauge.core.errors import StateError
from driftgauge.jobs.adapters import AdapterPool
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.repair.service import Repair, build_repair
from driftgauge.state.store import StateStore

log = logging.getLogger("driftgauge.repair")
JUDGE_EVERY = 60.0
GUARD_EVERY = 900.0
"""Silent changes: every signed partition is digested in its store this often."""
JUDGE_JOBS = (
    ("repair-judge", JUDGE_EVERY, False, True),
    ("repair-guard", GUARD_EVERY, True, False),
)
"""Each judge job: its id (its claim too), its period in seconds, `signed` and `rest`."""


@asynccontextmanager
async def open_repair(
    config: Config,
    state: StateStore,
    adapters: AdapterPool,
    clock: Callable[[], datetime],
    jobs: JobRuntime | None,
) -> AsyncIterator[Repair]:
    """Open repair and load its series; with `jobs`, schedule its judgements there."""

    async def sides(check: str) -> tuple[Any, Any]:
        both = await adapters.get(check)
        return both.source, both.reader

    repair = build_repair(state.calls, config.checks, sides, clock)
    await repair.refresh()
    if jobs is not None:
        # Judged once across replicas per scheduled time: the job runtime claims it.
        for job, every, signed, rest in JUDGE_JOBS:
            run = partial(_judge, repair, signed=signed, rest=rest)
            jobs.add_every(job, "repair", timedelta(seconds=every), run, claim=job)
    try:
        yield repair
    finally:
        if jobs is not None:
            for job, *_ in JUDGE_JOBS:
                jobs.remove(job)


async def _judge(repair: Repair, _at: datetime, *, signed: bool = True, rest: bool = True) -> None:
    """Judge the repair rules asked for at a scheduled time; a state-database outage is logged."""
    try:
        await repair.judge(signed=signed, rest=rest)
    except StateError as exc:
        log.warning("could not judge repair breaches", extra={"error": str(exc)})
