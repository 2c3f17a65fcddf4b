"""REST endpoints of safe repair: watermarks, consumers, reads, backfills, probes, breaches.

The service's lifespan opens repair (app/repair.py) and puts it on app.state; the routes
reach it there.
"""

# No `from __future__ import annotations`: FastAPI must see the dependency aliases
# (`Service`, `BackfillId`, ...) as real objects.
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import Annotated, Any, TypeVar, cast

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
ReadsPage = Annotated[Page, paged(200, 10_000)]
BreachesPage = Annotated[Page, paged(100, 1000)]
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


Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Any]])


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


def _answering(endpoint: Endpoint) -> Endpoint:
    """Return `endpoint` with its repair errors answered as _translated maps them."""

    @wraps(endpoint)
    async def answer(*args: Any, **kwargs: Any) -> Any:
        with _translated():
            return await endpoint(*args, **kwargs)

    return cast(Endpoint, answer)


@dataclass(frozen=True)
class _Routes:
    """The router each area adds its routes to, and the dependencies of a read and a write."""

    router: APIRouter
    read: list[Any]
    write: list[Any]

    def reads(self, path: str, tag: str = "repair") -> Callable[[Endpoint], Endpoint]:
        """Add a GET route: its answer's model is the endpoint's return annotation."""
        return self._add(path, "GET", tag, self.read, {})

    def writes(
        self, path: str, method: str = "POST", tag: str = "repair", **extra: Any
    ) -> Callable[[Endpoint], Endpoint]:
        """Add a write a lifecycle rule or a store can refuse; `extra` goes to the route."""
        return self._add(path, method, tag, self.write, {"responses": REFUSED, **extra})

    def _add(
        self, path: str, method: str, tag: str, deps: list[Any], extra: dict[str, Any]
    ) -> Callable[[Endpoint], Endpoint]:
        def add(endpoint: Endpoint) -> Endpoint:
            route = self.router.api_route(
                path, methods=[method], tags=[tag], dependencies=deps, **extra
            )
            return route(_answering(endpoint))

        return add


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

    @r.reads("/watermarks")
    async def list_watermarks(service: Service) -> list[WatermarkOut]:
        """List every pipeline's watermark."""
        return await service.watermarks.all()

    @r.reads("/watermarks/{pipeline}")
    async def get_watermark(pipeline: PathName, service: Service) -> WatermarkShown:
        """Return one watermark with its latest moves (who, when, why)."""
        return await service.watermarks.get(pipeline)

    @r.writes("/watermarks/{pipeline}/advance")
    async def advance_watermark(
        pipeline: PathName, body: WatermarkMove, service: Service
    ) -> WatermarkShown:
        """Move a watermark forward (creating it); never backwards."""
        return await service.refreshed(service.watermarks.advance(pipeline, body))

    @r.writes("/watermarks/{pipeline}/move-back")
    async def move_watermark_back(
        pipeline: PathName, body: WatermarkMove, service: Service
    ) -> WatermarkShown:
        """Move a watermark back; outside an open backfill this raises a breach."""
        moved = service.watermarks.move_back(pipeline, body.to, by=body.by, reason=body.reason)
        return await service.refreshed(moved)


def _consumer_routes(r: _Routes) -> None:
    """Add the routes that list, write and remove consumers."""

    @r.reads("/consumers")
    async def list_consumers(service: Service) -> list[ConsumerOut]:
        """List consumers in replay order."""
        return await service.consumers.list()

    @r.writes("/consumers/{name}", "PUT")
    async def put_consumer(name: PathName, body: ConsumerIn, service: Service) -> ConsumerOut:
        """Create or replace a consumer."""
        return await service.consumers.put(name, body)

    @r.reads("/consumers/{name}")
    async def get_consumer(name: PathName, service: Service) -> ConsumerOut:
        """Return one consumer."""
        return await service.consumers.get(name)

    @r.router.delete("/consumers/{name}", tags=["repair"], dependencies=r.write, status_code=204)
    @_answering
    async def delete_consumer(name: PathName, service: Service) -> None:
        """Remove a consumer and its read log."""
        await service.consumers.delete(name)


def _read_routes(r: _Routes) -> None:
    """Add the routes of the read log."""

    @r.writes("/reads", status_code=201)
    async def record_read(body: ReadIn, service: Service) -> ReadsRecorded:
        """Log that a consumer read partitions of a check (with what they held now)."""
        parts = [(p.start, p.end) for p in body.partitions]
        n = await service.reads.record(body.consumer, body.check, parts, read_at=body.read_at)
        return ReadsRecorded(recorded=n)

    @r.reads("/reads")
    async def list_reads(
        service: Service, paging: ReadsPage, consumer: QueryName = None, check: QueryName = None
    ) -> list[ReadOut]:
        """List logged reads, newest first."""
        return await service.reads.list(consumer=consumer, check=check, page=paging)


def _backfill_routes(r: _Routes) -> None:
    """Add the routes that plan, list, show and announce backfills."""

    @r.writes("/backfills", tag="backfill", status_code=201)
    async def plan_backfill(body: PlanIn, service: Service) -> BackfillShown:
        """Plan: targets from stored results, first bad partition, reset point, consumers."""
        return await service.backfills.plan(body)

    @r.reads("/backfills", tag="backfill")
    async def list_backfills(
        service: Service,
        paging: Annotated[Page, paged(50, 1000)],
        check: QueryName = None,
        open_only: Annotated[bool, Query(alias="open")] = False,
    ) -> list[BackfillOut]:
        """List backfills, newest first."""
        return await service.backfills.all(check=check, open_only=open_only, page=paging)

    @r.reads("/backfills/{backfill_id}", tag="backfill")
    async def show_backfill(backfill_id: BackfillId, service: Service) -> BackfillShown:
        """Return a backfill: targets, consumers, replays, ledger runs, events."""
        return await service.backfills.show(backfill_id)

    @r.writes("/backfills/{backfill_id}/announce", tag="backfill")
    async def announce_backfill(
        backfill_id: BackfillId, body: AnnounceIn, service: Service
    ) -> BackfillShown:
        """Capture the totals before, render the announcement, post it to the consumers."""
        return await service.backfills.announce(backfill_id, by=body.by, runs_at=body.runs_at)


def _step_route(
    r: _Routes, step: str, take: Callable[..., Awaitable[BackfillShown]], doc: str
) -> None:
    """Add the POST route of a lifecycle step that takes only who takes it."""

    async def take_step(backfill_id: BackfillId, body: StepIn, service: Service) -> BackfillShown:
        return await take(service.backfills, backfill_id, by=body.by)

    take_step.__doc__ = doc
    r.writes(f"/backfills/{{backfill_id}}/{step}", tag="backfill", name=f"{step}_backfill")(
        take_step
    )


def _lifecycle_routes(r: _Routes) -> None:
    """Add the steps after the announcement: start, runs, verify, replay, close."""
    _step_route(
        r,
        "start",
        Backfills.start,
        "Allow the recompute (announced when signed; closed partitions only).",
    )

    @r.writes("/backfills/{backfill_id}/runs", tag="backfill", status_code=201)
    async def attach_run(backfill_id: BackfillId, body: RunIn, service: Service) -> RunAttached:
        """Record a ledger run of the recompute under the backfill id."""
        await service.backfills.attach_run(backfill_id, body.ledger_run_id)
        return RunAttached(backfill_id=backfill_id, ledger_run_id=body.ledger_run_id)

    _step_route(
        r, "verify", Backfills.verify, "Re-reconcile every target partition; all must be ok."
    )

    @r.writes("/backfills/{backfill_id}/replay", tag="backfill")
    async def replay_backfill(
        backfill_id: BackfillId, body: ReplayIn, service: Service
    ) -> BackfillShown:
        """Re-trigger consumers in rank order (one, or every unfinished one)."""
        return await service.replays.replay(backfill_id, by=body.by, consumer=body.consumer)

    @r.writes("/backfills/{backfill_id}/replays/{consumer}/finished", tag="backfill")
    async def replay_finished(
        backfill_id: BackfillId, consumer: PathName, body: ReplayDone, service: Service
    ) -> BackfillShown:
        """Report that a consumer's re-trigger command finished (or failed)."""
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

    @r.writes("/probes/rerun")
    async def probe_rerun(body: ProbeIn, service: Service) -> ProbeOut:
        """Compare a partition after the last two closed ledger runs of one window."""
        probed = service.probe.ledger(
            body.check, window_start=body.window_start, window_end=body.window_end
        )
        return await service.refreshed(probed)

    @r.reads("/repair/breaches")
    async def list_breaches(
        service: Service, paging: BreachesPage, kind: QueryName = None, active: bool = False
    ) -> list[RepairBreachOut]:
        """List repair breaches, newest first."""
        return await service.breaches.list(kind=kind, active_only=active, page=paging)

    @r.router.post("/repair/judge", tags=["repair"], dependencies=r.write)
    async def judge_now(service: Service) -> JudgedOut:
        """Judge watermark stalls, silent changes and ledger reruns now."""
        return await service.judge()
