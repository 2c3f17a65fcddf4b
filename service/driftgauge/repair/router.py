"""REST endpoints of safe repair: watermarks, consumers, reads, backfills, probes, breaches.

The service's lifespan opens repair (app/repair.py) and puts it on app.state; the routes
reach it there.
"""

# No `from __future__ import annotations`: FastAPI must see the dependency aliases
# (`Service`, `BackfillId`, ...) as real objects.
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query

from driftgauge.core.paging import Page
from driftgauge.repair.backfill import Backfills
from driftgauge.repair.errors import NotFound, Refused
from driftgauge.repair.models import (
    AnnounceIn,
    BackfillOut,
    BackfillShown,
    ConsumerIn,
    ConsumerOut,
    JudgedOut,
    PlanIn,
    ProbeIn,
    ProbeOut,
    ReadIn,
    ReadOut,
    ReadsRecorded,
    RefusedOut,
    RepairBreachOut,
    ReplayDone,
    ReplayIn,
    RunAttached,
    RunIn,
    StepIn,
    WatermarkMove,
    WatermarkOut,
    WatermarkShown,
)
from driftgauge.repair.service import Repair
from driftgauge.routing import Dependency, answered, app_service, paged

BackfillId = Annotated[int, Path(ge=1, le=2**63 - 1, description="backfill id")]
PathName = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]
QueryName = Annotated[str | None, Query(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]
Service = Annotated[Repair, Depends(app_service("repair", "repair is not running"))]
REFUSED: dict[int | str, dict[str, Any]] = {
    409: {
        "model": RefusedOut,
        "description": "A lifecycle rule refused the step (the body names it).",
    },
    422: {
        "description": "Bad input (naming the field), or a step that cannot succeed "
        "(the body names the rule)."
    },
    502: {"description": "A store answered with an error while digesting partitions."},
    504: {"description": "A store did not answer in time while digesting partitions."},
}
"""The error answers of a route that a lifecycle rule or a store can refuse."""


@contextmanager
def _translated() -> Iterator[None]:
    """Map repair errors to 404, 409 / 422 (naming the rule) and 422 (naming the field)."""
    with answered(NotFound):
        try:
            yield
        except Refused as exc:
            raise HTTPException(
                exc.status, {"step": exc.step, "rule": exc.rule, "detail": exc.detail}
            ) from None


@dataclass(frozen=True)
class _Routes:
    """The router each area adds its routes to, and the dependencies of a read and a write."""

    router: APIRouter
    read: list[Any]
    write: list[Any]


def repair_router(require_write: Dependency, require_read: Dependency) -> APIRouter:
    """Return the repair routes; writes need `require_write` to pass."""
    router = APIRouter()
    routes = _Routes(router, read=[Depends(require_read)], write=[Depends(require_write)])
    # In this order: the schema lists the paths as they were added.
    _watermark_routes(routes)
    _consumer_routes(routes)
    _read_routes(routes)
    _backfill_routes(routes)
    _lifecycle_routes(routes)
    _probe_routes(routes)
    return router


def _watermark_routes(r: _Routes) -> None:
    """Add the routes that read and move watermarks."""

    @r.router.get(
        "/watermarks", tags=["repair"], dependencies=r.read, response_model=list[WatermarkOut]
    )
    async def list_watermarks(service: Service) -> list[dict[str, Any]]:
        """List every pipeline's watermark."""
        return await service.watermarks.all()

    @r.router.get(
        "/watermarks/{pipeline}",
        tags=["repair"],
        dependencies=r.read,
        response_model=WatermarkShown,
    )
    async def get_watermark(pipeline: PathName, service: Service) -> dict[str, Any]:
        """Return one watermark with its latest moves (who, when, why)."""
        with _translated():
            return await service.watermarks.get(pipeline)

    @r.router.post(
        "/watermarks/{pipeline}/advance",
        tags=["repair"],
        dependencies=r.write,
        responses=REFUSED,
        response_model=WatermarkShown,
    )
    async def advance_watermark(
        pipeline: PathName, body: WatermarkMove, service: Service
    ) -> dict[str, Any]:
        """Move a watermark forward (creating it); never backwards."""
        with _translated():
            out = await service.watermarks.advance(pipeline, body)
        await service.refresh()
        return out

    @r.router.post(
        "/watermarks/{pipeline}/move-back",
        tags=["repair"],
        dependencies=r.write,
        responses=REFUSED,
        response_model=WatermarkShown,
    )
    async def move_watermark_back(
        pipeline: PathName, body: WatermarkMove, service: Service
    ) -> dict[str, Any]:
        """Move a watermark back; outside an open backfill this raises a breach."""
        with _translated():
            out = await service.watermarks.move_back(
                pipeline, body.to, by=body.by, reason=body.reason
            )
        await service.refresh()
        return out


def _consumer_routes(r: _Routes) -> None:
    """Add the routes that list, write and remove consumers."""

    @r.router.get(
        "/consumers", tags=["repair"], dependencies=r.read, response_model=list[ConsumerOut]
    )
    async def list_consumers(service: Service) -> list[dict[str, Any]]:
        """List consumers in replay order."""
        return await service.consumers.list()

    @r.router.put(
        "/consumers/{name}",
        tags=["repair"],
        dependencies=r.write,
        responses=REFUSED,
        response_model=ConsumerOut,
    )
    async def put_consumer(name: PathName, body: ConsumerIn, service: Service) -> dict[str, Any]:
        """Create or replace a consumer."""
        with _translated():
            return await service.consumers.put(name, body)

    @r.router.get(
        "/consumers/{name}", tags=["repair"], dependencies=r.read, response_model=ConsumerOut
    )
    async def get_consumer(name: PathName, service: Service) -> dict[str, Any]:
        """Return one consumer."""
        with _translated():
            return await service.consumers.get(name)

    @r.router.delete("/consumers/{name}", tags=["repair"], dependencies=r.write, status_code=204)
    async def delete_consumer(name: PathName, service: Service) -> None:
        """Remove a consumer and its read log."""
        with _translated():
            await service.consumers.delete(name)


def _read_routes(r: _Routes) -> None:
    """Add the routes of the read log."""

    @r.router.post(
        "/reads",
        tags=["repair"],
        dependencies=r.write,
        status_code=201,
        responses=REFUSED,
        response_model=ReadsRecorded,
    )
    async def record_read(body: ReadIn, service: Service) -> dict[str, Any]:
        """Log that a consumer read partitions of a check (with what they held now)."""
        with _translated():
            n = await service.reads.record(
                body.consumer,
                body.check,
                [(p.start, p.end) for p in body.partitions],
                read_at=body.read_at,
            )
        return {"recorded": n}

    @r.router.get("/reads", tags=["repair"], dependencies=r.read, response_model=list[ReadOut])
    async def list_reads(
        service: Service,
        paging: Annotated[Page, paged(200, 10_000)],
        consumer: QueryName = None,
        check: QueryName = None,
    ) -> list[dict[str, Any]]:
        """List logged reads, newest first."""
        return await service.reads.list(consumer=consumer, check=check, page=paging)


def _backfill_routes(r: _Routes) -> None:
    """Add the routes that plan, list, show and announce backfills."""

    @r.router.post(
        "/backfills",
        tags=["backfill"],
        dependencies=r.write,
        status_code=201,
        responses=REFUSED,
        response_model=BackfillShown,
    )
    async def plan_backfill(body: PlanIn, service: Service) -> dict[str, Any]:
        """Plan: targets from stored results, first bad partition, reset point, consumers."""
        with _translated():
            return await service.backfills.plan(body)

    @r.router.get(
        "/backfills", tags=["backfill"], dependencies=r.read, response_model=list[BackfillOut]
    )
    async def list_backfills(
        service: Service,
        paging: Annotated[Page, paged(50, 1000)],
        check: QueryName = None,
        open_only: Annotated[bool, Query(alias="open")] = False,
    ) -> list[dict[str, Any]]:
        """List backfills, newest first."""
        return await service.backfills.all(check=check, open_only=open_only, page=paging)

    @r.router.get(
        "/backfills/{backfill_id}",
        tags=["backfill"],
        dependencies=r.read,
        response_model=BackfillShown,
    )
    async def show_backfill(backfill_id: BackfillId, service: Service) -> dict[str, Any]:
        """Return a backfill: targets, consumers, replays, ledger runs, events."""
        with _translated():
            return await service.backfills.show(backfill_id)

    @r.router.post(
        "/backfills/{backfill_id}/announce",
        tags=["backfill"],
        dependencies=r.write,
        responses=REFUSED,
        response_model=BackfillShown,
    )
    async def announce_backfill(
        backfill_id: BackfillId, body: AnnounceIn, service: Service
    ) -> dict[str, Any]:
        """Capture the totals before, render the announcement, post it to the consumers."""
        with _translated():
            return await service.backfills.announce(backfill_id, by=body.by, runs_at=body.runs_at)


def _step_route(
    r: _Routes, step: str, take: Callable[..., Awaitable[dict[str, Any]]], doc: str
) -> None:
    """Add the POST route of a lifecycle step that takes only who takes it."""

    async def take_step(backfill_id: BackfillId, body: StepIn, service: Service) -> dict[str, Any]:
        with _translated():
            return await take(service.backfills, backfill_id, by=body.by)

    take_step.__doc__ = doc
    r.router.post(
        f"/backfills/{{backfill_id}}/{step}",
        tags=["backfill"],
        dependencies=r.write,
        responses=REFUSED,
        name=f"{step}_backfill",
        response_model=BackfillShown,
    )(take_step)


def _lifecycle_routes(r: _Routes) -> None:
    """Add the steps after the announcement: start, runs, verify, replay, close."""
    _step_route(
        r,
        "start",
        Backfills.start,
        "Allow the recompute (announced when signed; closed partitions only).",
    )

    @r.router.post(
        "/backfills/{backfill_id}/runs",
        tags=["backfill"],
        dependencies=r.write,
        status_code=201,
        responses=REFUSED,
        response_model=RunAttached,
    )
    async def attach_run(backfill_id: BackfillId, body: RunIn, service: Service) -> dict[str, Any]:
        """Record a ledger run of the recompute under the backfill id."""
        with _translated():
            await service.backfills.attach_run(backfill_id, body.ledger_run_id)
        return {"backfill_id": backfill_id, "ledger_run_id": body.ledger_run_id}

    _step_route(
        r, "verify", Backfills.verify, "Re-reconcile every target partition; all must be ok."
    )

    @r.router.post(
        "/backfills/{backfill_id}/replay",
        tags=["backfill"],
        dependencies=r.write,
        responses=REFUSED,
        response_model=BackfillShown,
    )
    async def replay_backfill(
        backfill_id: BackfillId, body: ReplayIn, service: Service
    ) -> dict[str, Any]:
        """Re-trigger consumers in rank order (one, or every unfinished one)."""
        with _translated():
            return await service.replays.replay(backfill_id, by=body.by, consumer=body.consumer)

    @r.router.post(
        "/backfills/{backfill_id}/replays/{consumer}/finished",
        tags=["backfill"],
        dependencies=r.write,
        responses=REFUSED,
        response_model=BackfillShown,
    )
    async def replay_finished(
        backfill_id: BackfillId, consumer: PathName, body: ReplayDone, service: Service
    ) -> dict[str, Any]:
        """Report that a consumer's re-trigger command finished (or failed)."""
        with _translated():
            await service.replays.finish(
                backfill_id, consumer, ok=body.ok, detail=body.detail, by=body.by
            )
            return await service.backfills.show(backfill_id)

    _step_route(
        r,
        "close",
        Backfills.close,
        "File the backfill log row: totals before and after and the diff.",
    )


def _probe_routes(r: _Routes) -> None:
    """Add the rerun probe and the routes of repair breaches."""

    @r.router.post(
        "/probes/rerun",
        tags=["repair"],
        dependencies=r.write,
        responses=REFUSED,
        response_model=ProbeOut,
    )
    async def probe_rerun(body: ProbeIn, service: Service) -> dict[str, Any]:
        """Compare a partition after the last two closed ledger runs of one window."""
        with _translated():
            out = await service.probe.ledger(
                body.check, window_start=body.window_start, window_end=body.window_end
            )
        await service.refresh()
        return out

    @r.router.get(
        "/repair/breaches",
        tags=["repair"],
        dependencies=r.read,
        response_model=list[RepairBreachOut],
    )
    async def list_breaches(
        service: Service,
        paging: Annotated[Page, paged(100, 1000)],
        kind: QueryName = None,
        active: bool = False,
    ) -> list[dict[str, Any]]:
        """List repair breaches, newest first."""
        return await service.breaches.list(kind=kind, active_only=active, page=paging)

    @r.router.post("/repair/judge", tags=["repair"], dependencies=r.write, response_model=JudgedOut)
    async def judge_now(service: Service) -> dict[str, Any]:
        """Judge watermark stalls, silent changes and ledger reruns now."""
        return await service.judge()
