"""REST endpoints of the run ledger: sync jobs open runs, report batches and close them."""

# No `from __future__ import annotations`: FastAPI must see the dependency aliases built
# inside ledger_router() as real objects, not as names to look up in module globals.
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from pydantic import BaseModel

from driftgauge.core.paging import Page
from driftgauge.ledger.errors import LedgerConflict, LedgerNotFound
from driftgauge.ledger.models import (
    Acknowledge,
    Batch,
    BatchOut,
    BreachOut,
    LedgerKeyOut,
    Outcome,
    Rule,
    RunOpen,
    RunOut,
    Summary,
    WindowOut,
)
from driftgauge.ledger.service import LedgerService
from driftgauge.ledger.store import LedgerStore
from driftgauge.routing import Dependency, FeatureRoutes, answered, app_service, paged

# Bounds that PostgreSQL can hold, so a wild id or a NUL byte is a 422, not a 503.
RunId = Annotated[int, Path(ge=1, le=2**63 - 1, description="ledger run id")]
JobName = Annotated[
    str | None,
    Query(min_length=1, max_length=200, pattern=r"^[^\x00]*$", description="sync job name"),
]

_app_ledger = app_service("ledger", "the run ledger is not running")


def ledger_router(
    require_write: Dependency,
    require_read: Dependency,
    *,
    get_service: Callable[[Request], LedgerService] = _app_ledger,
) -> APIRouter:
    """Return the /ledger routes; writes and key listings need `require_write` to pass.

    `get_service` finds the LedgerService (default: `request.app.state.ledger`).
    """
    routes = FeatureRoutes.under("/ledger", require_write, require_read)
    _run_routes(routes, get_service)
    _breach_routes(routes, get_service)
    return routes.router


def _job_listing(
    r: FeatureRoutes,
    get_service: Callable[[Request], LedgerService],
    path: str,
    listed: Any,
    rows: Callable[[LedgerStore, str | None, int, int], Awaitable[Sequence[BaseModel]]],
    default: int,
    doc: str,
) -> None:
    """Add the GET route answering `listed`: `rows` of one job (all without `job`), paged."""
    Service = Annotated[LedgerService, Depends(get_service)]

    async def list_rows(
        service: Service, paging: Annotated[Page, paged(default, 1000)], job: JobName = None
    ) -> Sequence[BaseModel]:
        with _translated():
            return await rows(service.store, job, paging.limit, paging.offset)

    list_rows.__doc__ = doc
    name = f"list_{path.strip('/')}"
    r.router.get(path, response_model=listed, dependencies=r.read, name=name)(list_rows)


def _run_routes(r: FeatureRoutes, get_service: Callable[[Request], LedgerService]) -> None:
    """Add the routes that open, feed, close and list a sync job's runs."""
    Service = Annotated[LedgerService, Depends(get_service)]

    @r.router.post(
        "/runs",
        response_model=RunOut,
        status_code=201,
        dependencies=r.write,
        responses={200: {"model": RunOut, "description": "the run already existed"}},
    )
    async def open_run(body: RunOpen, service: Service, response: Response) -> RunOut:
        """Open a run of a sync job: the window it covers and the rows it was handed."""
        with _translated():
            run, created = await service.open_run(body)
        if not created:
            response.status_code = status.HTTP_200_OK
        return run

    @r.router.post("/runs/{run_id}/batches", response_model=BatchOut, dependencies=r.write)
    async def add_batch(run_id: RunId, body: Batch, service: Service) -> BatchOut:
        """Record where a batch of input rows ended up; a retried batch id counts once."""
        with _translated():
            return await service.add_batch(run_id, body)

    @r.router.post("/runs/{run_id}/close", response_model=RunOut, dependencies=r.write)
    async def close_run(run_id: RunId, body: Summary, service: Service) -> RunOut:
        """Close a run with the job's own summary; its window is then judged and reconciled."""
        with _translated():
            return await service.close_run(run_id, body)

    _job_listing(
        r,
        get_service,
        "/runs",
        list[RunOut],
        LedgerStore.runs,
        50,
        "List recent ledger runs, newest first.",
    )

    @r.router.get("/runs/{run_id}", response_model=RunOut, dependencies=r.read)
    async def get_run(run_id: RunId, service: Service) -> RunOut:
        """Return one run with its outcomes per reason."""
        with _translated():
            return await service.store.run(run_id)

    @r.router.get("/runs/{run_id}/keys", response_model=list[LedgerKeyOut], dependencies=r.write)
    async def run_keys(
        run_id: RunId,
        service: Service,
        paging: Annotated[Page, paged(1000, 10_000)],
        outcome: Outcome | None = None,
    ) -> list[LedgerKeyOut]:
        """List keys the run reported as no_match, skipped or failed (reveals keys)."""
        with _translated():
            await service.store.run(run_id)
            return await service.store.keys(
                run_id, outcome=outcome, limit=paging.limit, offset=paging.offset
            )


def _breach_routes(r: FeatureRoutes, get_service: Callable[[Request], LedgerService]) -> None:
    """Add the routes that list and acknowledge breaches, and list judged windows."""
    Service = Annotated[LedgerService, Depends(get_service)]

    @r.router.get("/breaches", response_model=list[BreachOut], dependencies=r.read)
    async def list_breaches(
        service: Service,
        paging: Annotated[Page, paged(100, 1000)],
        job: JobName = None,
        active: bool = False,
    ) -> list[BreachOut]:
        """List recorded breaches of the ledger rules, newest window first."""
        with _translated():
            return await service.store.breaches(
                job, active_only=active, limit=paging.limit, offset=paging.offset
            )

    @r.router.post(
        "/breaches/{job}/{window_day}/{rule}/acknowledge",
        response_model=BreachOut,
        dependencies=r.write,
    )
    async def acknowledge_breach(
        job: Annotated[
            str, Path(min_length=1, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_.:-]*$")
        ],
        window_day: date,
        rule: Rule,
        body: Acknowledge,
        service: Service,
    ) -> BreachOut:
        """Acknowledge a breach (who and why): it leaves the open breaches and the alerts."""
        with _translated():
            return await service.acknowledge(job, window_day, rule, body)

    _job_listing(
        r,
        get_service,
        "/windows",
        list[WindowOut],
        LedgerStore.windows,
        30,
        "List judged job windows with the rules each breaches now.",
    )


def _translated() -> AbstractContextManager[None]:
    """Map ledger errors to 404 / 409 / 422 responses that name the field."""
    return answered(LedgerNotFound, (LedgerConflict,))
