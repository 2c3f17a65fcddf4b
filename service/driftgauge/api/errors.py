"""Map domain errors to HTTP answers: unknown check 404, busy 409, stores 502/504, state 503."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from driftgauge.core.bounds import json_safe
from driftgauge.core.errors import StateError, StoreError, StoreTimeout, UnknownCheck
from driftgauge.jobs.ticks import CheckBusy

log = logging.getLogger("driftgauge.api")


def add_error_handlers(app: FastAPI) -> None:
    """Answer each domain error with its status code and a detail naming the problem."""

    async def unknown_check(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    async def busy(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    async def state_down(request: Request, exc: Exception) -> Response:
        log.warning("state database error", extra={"error": str(exc)})
        return JSONResponse({"detail": f"state database unavailable: {exc}"}, status_code=503)

    async def store_down(request: Request, exc: Exception) -> Response:
        code = 504 if isinstance(exc, StoreTimeout) else 502
        return JSONResponse({"detail": f"store {exc}"}, status_code=code)

    async def invalid(request: Request, exc: Exception) -> Response:
        # The errors echo the input: a NaN or a lone surrogate in it must still serialise.
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"detail": json_safe(jsonable_encoder(exc.errors()))}, status_code=422)

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(UnknownCheck, unknown_check)
    app.add_exception_handler(CheckBusy, busy)
    app.add_exception_handler(StateError, state_down)
    app.add_exception_handler(StoreError, store_down)
