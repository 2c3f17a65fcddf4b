"""The run ledger, canaries, vocabulary and volume, opened and closed together by the lifespan.

The app wires them in with a few calls: include `api.audit.audit_router` once at app
creation, open the audit in the lifespan (`open_audit`), put `audit.parts` into the metrics
registry and `audit` on `app.state`, and let the runner ask
`exclusion_source(audit.ledger.store)` for the `ledger_excluded` mapping of each
reconciliation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from typing import Any

from driftgauge.api.audit import Audit
from driftgauge.canary.metrics import CanaryMetrics
from driftgauge.canary.probe import Connections
from driftgauge.canary.service import CanaryService
from driftgauge.canary.store import CanaryStore
from driftgauge.config.frozen import Config
from driftgauge.core.clock import utc_now
from driftgauge.jobs.recurring import audit_job, canary_jobs, reconcile_job, signals_jobs
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.ledger.hooks import ReconcileFn, ReconcileOnClose
from driftgauge.ledger.metrics import LedgerMetrics
from driftgauge.ledger.service import LedgerService
from driftgauge.ledger.store import LedgerStore
from driftgauge.pg.pools import open_pool
from driftgauge.signals.metrics import SignalsMetrics
from driftgauge.signals.service import SignalsService, SourceGetter
from driftgauge.signals.store import SignalsStore


def _assemble(
    config: Config,
    pool: Any,
    deadline: float,
    reconcile: ReconcileFn,
    source: SourceGetter,
    clock: Callable[[], datetime],
    connections: Connections | None,
) -> Audit:
    """Return the audit's services and metrics, each over its store on the state pool."""
    ledger_store, canary_store = LedgerStore(pool, deadline), CanaryStore(pool, deadline)
    signals_store = SignalsStore(pool, deadline)
    hook = ReconcileOnClose(config.checks, reconcile, clock=clock)
    ledger = LedgerService(ledger_store, config.checks, clock=clock, on_close=hook)
    canary_metrics = CanaryMetrics(
        canary_store, [n for n, c in config.checks.items() if c.canary is not None]
    )

    async def after_canary(_: object) -> None:
        await canary_metrics.refresh()

    return Audit(
        ledger=ledger,
        reconcile_on_close=hook,
        canary=CanaryService(
            config.checks,
            canary_store,
            source,
            clock=clock,
            on_result=after_canary,
            connections=connections,
        ),
        signals=SignalsService(config.checks, signals_store, source, clock=clock),
        ledger_metrics=LedgerMetrics(
            ledger_store, list(ledger.jobs), {j.job: j.timezone for j in ledger.jobs.values()}
        ),
        canary_metrics=canary_metrics,
        signals_metrics=SignalsMetrics(signals_store, list(config.checks)),
    )


@asynccontextmanager
async def open_audit(
    config: Config,
    *,
    reconcile: ReconcileFn,
    source: SourceGetter,
    clock: Callable[[], datetime] = utc_now,
    jobs: JobRuntime | None = None,
    every: float = 60.0,
    deadline: float = 10.0,
    connections: Connections | None = None,
    pool: Any | None = None,
) -> AsyncIterator[Audit]:
    """Open the audit on the state database; with `jobs`, schedule its jobs there.

    `reconcile(check, start, end)` runs when a ledger run's window has settled (the app
    passes a manual run of the check); `source(check)` returns the check's source adapter
    (the app's shared one: it is not closed here). The runtime's claims let replicas
    sharing the state database run each canary, measurement and ledger judgement once per
    scheduled time; the audit job judges and reloads every `every` seconds.
    """
    # The service passes the state store's pool (one pool per database); alone (the CLI,
    # tests) the audit opens and closes its own.
    owned = pool is None
    if pool is None:
        pool = await open_pool(config.state, deadline=deadline)
    audit = _assemble(config, pool, deadline, reconcile, source, clock, connections)
    hook = audit.reconcile_on_close
    added: list[str] = []
    try:
        await audit.tick()
        if jobs is not None:
            runtime = jobs
            hook.on_pending = lambda p: runtime.add(reconcile_job(hook, p))
            own = [
                *canary_jobs(config.checks, audit.canary),
                *signals_jobs(config.checks, audit.signals),
                audit_job(partial(audit.tick, judge=True), partial(audit.tick, judge=False), every),
            ]
            jobs.add(*own)
            added = [j.id for j in own]
        yield audit
    finally:
        hook.on_pending = None
        if jobs is not None:
            for job_id in added + [p.job_id for p in hook.pending]:
                jobs.remove(job_id)
        if owned:
            try:
                await asyncio.wait_for(pool.close(), deadline)
            except TimeoutError:
                pool.terminate()
