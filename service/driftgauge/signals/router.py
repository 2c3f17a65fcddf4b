"""REST endpoint of the volume band: each day's verdict, including days not judged yet."""

# No `from __future__ import annotations`: FastAPI must see the dependency alias built
# inside signals_router() as a real object.
from collections.abc import Callable
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, status
from pydantic import BaseModel, ConfigDict

from driftgauge.routing import Dependency
from driftgauge.signals.service import SignalsService
from driftgauge.signals.volume import VolumeStatus


class VolumeDayOut(BaseModel):
    """One day bucket's volume verdict and the band it was judged against."""

    day: date
    status: VolumeStatus
    distinct_keys: int
    history_days: int | None
    """Trailing days of source history the band was built from (None: stored before counted)."""
    mean: float
    sd: float
    low: float
    high: float

    # The API form of a stored VolumeDay is read from its attributes of the same names.
    model_config = ConfigDict(from_attributes=True)


class VolumeOut(BaseModel):
    """A check's latest volume verdicts, oldest day first."""

    check: str
    needed_history_days: int
    days: list[VolumeDayOut]


def signals_router(
    require_read: Dependency, *, get_service: Callable[..., SignalsService]
) -> APIRouter:
    """Return the /checks/{check}/volume route."""
    router = APIRouter(tags=["signals"])
    Service = Annotated[SignalsService, Depends(get_service)]

    @router.get(
        "/checks/{check}/volume", response_model=VolumeOut, dependencies=[Depends(require_read)]
    )
    async def volume(check: str, service: Service) -> VolumeOut:
        """Return each day's volume verdict; `insufficient_history` days were not judged."""
        settings = service.volume_settings(check)
        if settings is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"check: no check named {check!r} has volume settings"
            )
        days = await service.store.volume(check)
        return VolumeOut(
            check=check,
            needed_history_days=settings.needed_history,
            days=[VolumeDayOut.model_validate(d) for d in days],
        )

    return router
