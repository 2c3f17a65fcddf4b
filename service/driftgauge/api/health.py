"""The endpoints probes and scrapers call: /healthz, /readyz and /metrics."""

from __future__ import annotations

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from driftgauge.api.auth import TokenCheck
from driftgauge.api.models import HealthOut, answers
from driftgauge.api.opened import runtime
from driftgauge.core.errors import StateError


def add_health(app: FastAPI, tokens: TokenCheck) -> None:
    """Add the health and metrics endpoints."""

    @app.get("/healthz", response_model=HealthOut, tags=["health"])
    async def healthz() -> HealthOut:
        """Return ok while the process serves requests (touches no store)."""
        return HealthOut(status="ok")

    @app.get(
        "/readyz", response_model=HealthOut, tags=["health"], responses={503: {"model": HealthOut}}
    )
    async def readyz(request: Request) -> Response:
        """Return ok when the state database answers and the scheduler runs."""
        rt = runtime(request)
        state = "ok"
        try:
            await rt.state.ping()
        except StateError as exc:
            state = str(exc)
        sched = (
            ("running" if rt.jobs.running else "stopped") if rt.scheduler_enabled else "disabled"
        )
        ready = state == "ok" and sched != "stopped"
        body = HealthOut(status="ok" if ready else "unavailable", state=state, scheduler=sched)
        return JSONResponse(body.model_dump(), status_code=200 if ready else 503)

    @app.get(
        "/metrics",
        tags=["health"],
        response_class=Response,
        dependencies=[Depends(tokens.require_metrics)],
        responses={
            200: {
                "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
                "description": "The Prometheus text exposition.",
            },
            **answers(401, 403),
        },
    )
    async def metrics(request: Request) -> Response:
        """Return the Prometheus exposition of the latest stored results."""
        return Response(generate_latest(runtime(request).registry), media_type=CONTENT_TYPE_LATEST)
