"""The composition root: the FastAPI app, and a lifespan that opens and closes the runtime."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, ProcessCollector

from driftgauge import __version__
from driftgauge.api.audit import Audit, audit_router
from driftgauge.api.auth import TokenCheck
from driftgauge.api.errors import add_error_handlers
from driftgauge.api.health import add_health
from driftgauge.api.middleware import RequestContext
from driftgauge.api.models import answers
from driftgauge.api.openapi import add_schema
from driftgauge.api.opened import Runtime
from driftgauge.api.page import add_page
from driftgauge.api.routes import router
from driftgauge.app.audit import open_audit
from driftgauge.app.repair import open_repair
from driftgauge.background import background_part, survive
from driftgauge.config.frozen import Check, Config
from driftgauge.core.clock import Clock, SystemClock, utc_now
from driftgauge.core.errors import StateError
from driftgauge.jobs.adapters import AdapterPool, Opener
from driftgauge.jobs.heartbeat import LeaseKeeper
from driftgauge.jobs.recurring import (
    HEARTBEAT,
    exporter_job,
    heartbeat_job,
    refresh_job,
    retention_job,
    tick_jobs,
)
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.jobs.schedule import job_specs
from driftgauge.jobs.schedule_metrics import schedule_part
from driftgauge.jobs.ticks import TickRunner
from driftgauge.ledger.service import exclusion_source
from driftgauge.metrics.collector import (
    CollectorPart,
    build_registry,
    process_part,
    reconciliation_part,
)
from driftgauge.metrics.history import history_part
from driftgauge.metrics.leader import exporter_part, stored_parts
from driftgauge.metrics.own import own_part
from driftgauge.metrics.snapshot import SnapshotCache, interrupted_part, state_part
from driftgauge.metrics.stores import store_retries_part
from driftgauge.repair.router import repair_router
from driftgauge.repair.service import Repair
from driftgauge.retention.job import RetentionJob
from driftgauge.state.election import ExporterElection
from driftgauge.state.store import StateStore
from driftgauge.stores import registry
from driftgauge.stores.base import StoreAdapter

log = logging.getLogger("driftgauge.api")


@dataclass(frozen=True)
class RuntimeOptions:
    """How create_app's runtime is opened: the knobs tests and embedders turn."""

    start_scheduler: bool
    opener: Opener | None
    clock: Callable[[], datetime]
    state_deadline: float
    run_deadline: float | None
    refresh_every: float | None
    metric_parts: Sequence[CollectorPart]


def create_app(
    config: Config,
    *,
    start_scheduler: bool = True,
    opener: Opener | None = None,
    clock: Callable[[], datetime] = utc_now,
    state_deadline: float = 10.0,
    run_deadline: float | None = None,
    refresh_every: float | None = None,
    metric_parts: Sequence[CollectorPart] = (),
) -> FastAPI:
    """Return the driftgauge app; nothing is opened until its lifespan starts.

    `opener` opens a store adapter for a view (default: driftgauge.stores.open_adapter);
    `metric_parts` adds collector parts after the reconciliation and process ones.
    """
    tokens = TokenCheck.from_config(config.api)
    options = RuntimeOptions(
        start_scheduler, opener, clock, state_deadline, run_deadline, refresh_every, metric_parts
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with _open_runtime(config, tokens, options) as rt:
            app.state.runtime = rt
            app.state.audit = rt.audit
            app.state.repair = rt.repair
            yield

    # The schema and docs are served below, behind the read check like the API they describe.
    app = FastAPI(
        title="driftgauge",
        version=__version__,
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        description="Reconcile derived data against its source of truth: day buckets,"
        " drill-down to hours, key-hash prefixes and keys.",
    )
    app.add_middleware(RequestContext)
    add_error_handlers(app)
    add_health(app, tokens)

    app.include_router(router, prefix="/api/v1", responses=answers(400, 401, 403, 404, 503))
    app.include_router(
        audit_router(tokens),
        prefix="/api/v1",
        responses=answers(400, 401, 403, 404, 409, 502, 503, 504),
    )
    app.include_router(
        repair_router(tokens.require, tokens.require_read),
        prefix="/api/v1",
        responses=answers(400, 401, 403, 404, 503),
    )
    add_schema(app, tokens, sorted(config.checks))
    add_page(app)
    return app


def _refresh_period(config: Config, refresh_every: float | None) -> float:
    if refresh_every is not None:
        return refresh_every
    periods = [
        c.schedule.recent_every.total_seconds()
        for c in config.checks.values()
        if c.schedule.recent_every is not None
    ]
    # Other replicas' runs reach this replica's /metrics within half a recent interval.
    return min([30.0, *[max(1.0, p / 2) for p in periods]])


def _retrying_stores(config: Config) -> list[str]:
    """Return the stores whose reads go through the retry layer (OpenSearch, Elasticsearch)."""
    return sorted(
        {
            view.store.name
            for c in config.checks.values()
            for view in (c.source, c.reader)
            if registry.kind_of(view.kind).has(registry.RETRIED_READS)
        }
    )


async def _reconciling(
    config: Config, options: RuntimeOptions
) -> tuple[StateStore, AdapterPool, SnapshotCache, TickRunner]:
    """Return the state store, the checks' adapters, the stored results and the tick runner."""
    state = await StateStore.open(
        # One pool for the state database: the runs, and the audit's ledger, canary and
        # signals stores beside them.
        config.state,
        deadline=options.state_deadline,
        pool_max=max(6, min(len(config.checks), config.state.max_concurrent_runs) + 4),
    )
    adapters = AdapterPool(config.checks, options.opener)
    snapshots = SnapshotCache(state, config.checks, options.clock)
    ticks = TickRunner(
        config.checks,
        state,
        adapters,
        sample_keys=config.api.sample_keys,
        clock=options.clock,
        deadline=options.run_deadline,
        on_change=snapshots.refresh,
        max_runs=config.state.max_concurrent_runs,
    )
    return state, adapters, snapshots, ticks


def _registry(
    config: Config,
    snapshots: SnapshotCache,
    audit: Audit,
    repair: Repair,
    options: RuntimeOptions,
    election: ExporterElection,
    clock: Callable[[], datetime],
) -> CollectorRegistry:
    """Return the service's metrics registry: every part, the stored ones from the leader only."""

    def is_leader() -> bool:
        return election.leader

    # Each fact once: the stored series from the elected replica only, the work each
    # replica did (and its view of the state database) from every replica.
    stored: list[CollectorPart] = [
        reconciliation_part(snapshots.current),
        history_part(snapshots.current),
        interrupted_part(snapshots.current),
        schedule_part(snapshots.current, job_specs(config.checks), clock),
        *audit.parts,
        repair.metrics,
        *options.metric_parts,
    ]
    registry = build_registry(
        [
            stored_parts(is_leader, stored),
            exporter_part(is_leader),
            state_part(snapshots),
            process_part(__version__),
            background_part,
            store_retries_part(_retrying_stores(config)),
            own_part(sorted(config.stores)),
        ]
    )
    ProcessCollector(registry=registry)  # process_* of this process, on our registry
    return registry


async def _recover(
    leases: LeaseKeeper, snapshots: SnapshotCache, election: ExporterElection
) -> None:
    """Expire a dead replica's runs, load the stored results, try for the exporter lock.

    Start-up never depends on the state database answering or its data being well-formed.
    """
    # Runs of a replica that died (this one, before a restart) expire now or, if
    # their lease has not run out yet, at a later heartbeat.
    try:
        await leases.expire()
    except StateError as exc:
        log.warning("could not expire interrupted runs", extra={"error": str(exc)})
    with survive("snapshot_refresh", "load stored results"):
        try:
            await snapshots.refresh()
        except StateError as exc:
            log.warning("could not load stored results", extra={"error": str(exc)})
    try:
        await election.attempt()
    except StateError as exc:
        log.warning("could not take the exporter lock", extra={"error": str(exc)})


@asynccontextmanager
async def _open_runtime(
    config: Config, tokens: TokenCheck, options: RuntimeOptions
) -> AsyncIterator[Runtime]:
    """Open the state store, the checks' runs, the audit and the jobs; close them after."""
    start_scheduler, clock = options.start_scheduler, options.clock
    state, adapters, snapshots, ticks = await _reconciling(config, options)
    # A plain function is a data clock (a test's frozen time): the jobs then fire on the
    # wall clock, so the heartbeat and the reloads go on.
    jobs = JobRuntime(clock if isinstance(clock, Clock) else SystemClock(), claims=state.claims)
    retention = RetentionJob(state, config, clock=clock)
    leases = LeaseKeeper(state, config.state.lease, on_expired=snapshots.refresh)

    async def source_of(check: Check) -> StoreAdapter:
        return (await adapters.get(check.name)).source

    refresh = _refresh_period(config, options.refresh_every)
    stack = AsyncExitStack()
    try:
        # The audit reloads its parts (and judges ledger deadlines) as often as the run
        # results, so a summary, breach or vocabulary verdict reaches /metrics as promptly.
        audit = await stack.enter_async_context(
            open_audit(
                config,
                reconcile=ticks.run_after,
                source=source_of,
                clock=clock,
                jobs=jobs if start_scheduler else None,
                every=refresh,
                connections=adapters.stores.connection,
                pool=state.calls.pool,
            )
        )
        ticks.exclusions = exclusion_source(audit.ledger.store)
        election = state.exporter_election()
        stack.push_async_callback(election.release)

        repair = await stack.enter_async_context(
            open_repair(config, state, adapters, clock, jobs if start_scheduler else None)
        )
        registry = _registry(config, snapshots, audit, repair, options, election, clock)
        await _recover(leases, snapshots, election)
        jobs.add(heartbeat_job(leases), refresh_job(snapshots, refresh), exporter_job(election))
        if start_scheduler:
            jobs.add(*tick_jobs(job_specs(config.checks), ticks.tick), retention_job(retention))
        jobs.start()
        yield Runtime(
            config,
            state,
            adapters,
            snapshots,
            ticks,
            jobs,
            registry,
            tokens,
            start_scheduler,
            clock,
            audit,
            repair,
            retention,
            asyncio.Semaphore(config.api.live_concurrency),
        )
    finally:
        # Nothing new starts; the runs under way are cancelled and recorded while the
        # heartbeat still keeps them owned, and only then does the heartbeat stop.
        await jobs.drain(keep={HEARTBEAT})
        await ticks.shutdown()
        await jobs.stop()
        await stack.aclose()
        await adapters.close()
        await state.close()
        log.info("stopped")
