"""REST endpoints of the canary: run one now (e.g. after the sync job's deploy), list results."""

# No `from __future__ import annotations`: FastAPI must see the dependency alias built
# inside canary_router() as a real object.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, status
from pydantic import BaseModel

from driftgauge.canary.probe import CanaryResult, Result
from driftgauge.canary.service import CanaryService
from driftgauge.core.errors import UnknownCheck
from driftgauge.core.instants import Instant
from driftgauge.core.paging import Page
from driftgauge.routing import Dependency, FeatureRoutes, app_service, paged


class CanaryOut(BaseModel):
    """One canary attempt (the sentinel's key is not shown)."""

    check: str
    result: Result
    started_at: Instant
    duration_seconds: float
    detail: str

    @classmethod
    def of(cls, r: CanaryResult) -> "CanaryOut":
        """Return the API form of a result."""
        return cls(
            check=r.check,
            result=r.result,
            started_at=r.started_at,
            duration_seconds=r.duration,
            detail=r.detail,
        )


_app_canary = app_service("canary", "canaries are not running")


def canary_router(
    require_write: Dependency,
    require_read: Dependency,
    *,
    get_service: Callable[[Request], CanaryService] = _app_canary,
) -> APIRouter:
    """Return the /canary routes; running one needs `require_write` to pass."""
    r = FeatureRoutes.under("/canary", require_write, require_read)
    Service = Annotated[CanaryService, Depends(get_service)]

    @r.router.post("/{check}", response_model=CanaryOut, dependencies=r.write)
    async def run(check: str, service: Service) -> CanaryOut:
        """Write and read back the check's sentinel now; return how it went."""
        try:
            return CanaryOut.of(await service.run(check))
        except UnknownCheck as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None

    @r.router.get("/{check}", response_model=list[CanaryOut], dependencies=r.read)
    async def history(
        check: str,
        service: Service,
        paging: Annotated[Page, paged(20, 500)],
    ) -> list[CanaryOut]:
        """List the check's latest canary attempts, newest first."""
        if check not in service.checks:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no check named {check!r} has a canary")
        return [
            CanaryOut.of(r) for r in await service.store.history(check, paging.limit, paging.offset)
        ]

    return r.router
