"""The OpenAPI schema and /docs: stable operation ids, the bearer scheme, local Swagger UI."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute, iter_route_contexts

from driftgauge.api.auth import TokenCheck

BEARER = "bearer"
# Hand-chosen, so generated clients keep their method names when a handler is renamed.
# Every documented operation needs one here (a test holds the table and the routes equal).
OPERATION_IDS: dict[tuple[str, str], str] = {
    ("get", "/healthz"): "getHealth",
    ("get", "/readyz"): "getReadiness",
    ("get", "/metrics"): "getMetrics",
    ("get", "/api/v1/checks"): "listChecks",
    ("get", "/api/v1/checks/{check}/days"): "listDays",
    ("get", "/api/v1/checks/{check}/days/{day}"): "getDay",
    ("get", "/api/v1/checks/{check}/days/{day}/hours/{hour}"): "getHour",
    ("get", "/api/v1/checks/{check}/days/{day}/keys"): "listDayKeys",
    ("get", "/api/v1/checks/{check}/runs"): "listRuns",
    ("post", "/api/v1/checks/{check}/runs"): "triggerRun",
    ("get", "/api/v1/checks/{check}/runs/{run_id}"): "getRun",
    ("get", "/api/v1/checks/{check}/volume"): "getVolume",
    ("post", "/api/v1/ledger/runs"): "openLedgerRun",
    ("get", "/api/v1/ledger/runs"): "listLedgerRuns",
    ("get", "/api/v1/ledger/runs/{run_id}"): "getLedgerRun",
    ("post", "/api/v1/ledger/runs/{run_id}/batches"): "addLedgerBatch",
    ("post", "/api/v1/ledger/runs/{run_id}/close"): "closeLedgerRun",
    ("get", "/api/v1/ledger/runs/{run_id}/keys"): "listLedgerRunKeys",
    ("get", "/api/v1/ledger/breaches"): "listLedgerBreaches",
    ("post", "/api/v1/ledger/breaches/{job}/{window_day}/{rule}/acknowledge"): (
        "acknowledgeLedgerBreach"
    ),
    ("get", "/api/v1/ledger/windows"): "listLedgerWindows",
    ("post", "/api/v1/canary/{check}"): "runCanary",
    ("get", "/api/v1/canary/{check}"): "listCanaryResults",
    ("get", "/api/v1/watermarks"): "listWatermarks",
    ("get", "/api/v1/watermarks/{pipeline}"): "getWatermark",
    ("post", "/api/v1/watermarks/{pipeline}/advance"): "advanceWatermark",
    ("post", "/api/v1/watermarks/{pipeline}/move-back"): "moveWatermarkBack",
    ("get", "/api/v1/consumers"): "listConsumers",
    ("put", "/api/v1/consumers/{name}"): "putConsumer",
    ("get", "/api/v1/consumers/{name}"): "getConsumer",
    ("delete", "/api/v1/consumers/{name}"): "deleteConsumer",
    ("post", "/api/v1/reads"): "recordReads",
    ("get", "/api/v1/reads"): "listReads",
    ("post", "/api/v1/backfills"): "planBackfill",
    ("get", "/api/v1/backfills"): "listBackfills",
    ("get", "/api/v1/backfills/{backfill_id}"): "getBackfill",
    ("post", "/api/v1/backfills/{backfill_id}/announce"): "announceBackfill",
    ("post", "/api/v1/backfills/{backfill_id}/start"): "startBackfill",
    ("post", "/api/v1/backfills/{backfill_id}/runs"): "attachBackfillRun",
    ("post", "/api/v1/backfills/{backfill_id}/verify"): "verifyBackfill",
    ("post", "/api/v1/backfills/{backfill_id}/replay"): "replayBackfill",
    ("post", "/api/v1/backfills/{backfill_id}/replays/{consumer}/finished"): "finishBackfillReplay",
    ("post", "/api/v1/backfills/{backfill_id}/close"): "closeBackfill",
    ("post", "/api/v1/probes/rerun"): "probeRerun",
    ("get", "/api/v1/repair/breaches"): "listRepairBreaches",
    ("post", "/api/v1/repair/judge"): "judgeRepairs",
}
# Which token check a dependency stands for, by the name of the function it calls.
_NEEDS = {
    "require": "token",
    "_write": "token",
    "require_read": "read",
    "_read": "read",
    "require_metrics": "metrics",
}


def add_schema(app: FastAPI, tokens: TokenCheck, check_names: list[str]) -> None:
    """Serve /openapi.json and /docs behind the read check, like the API they describe."""
    _patch(app, tokens, check_names)
    read = [Depends(tokens.require_read)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=read)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=read)
    async def docs() -> Response:
        # The UI and the schema come from this server: /docs renders with no network.
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="driftgauge",
            swagger_js_url="/static/swagger/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger/swagger-ui.css",
            swagger_favicon_url="/static/swagger/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": False},
        )


def _patch(app: FastAPI, tokens: TokenCheck, check_names: list[str]) -> None:
    """Build the schema once with operation ids, security and the check names filled in."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            needs = _route_needs(app)
            components = schema.setdefault("components", {})
            components.setdefault("securitySchemes", {})[BEARER] = {
                "type": "http",
                "scheme": "bearer",
                "description": "One of the configured api.tokens (api.metrics_tokens for "
                "/metrics). Reads need none while api.public_read is true.",
            }
            for path, ops in schema.get("paths", {}).items():
                for method, op in ops.items():
                    key = (method, path)
                    if key in OPERATION_IDS:
                        op["operationId"] = OPERATION_IDS[key]
                    security = _security(needs.get(key), tokens)
                    if security is not None:
                        op["security"] = security
                    for param in op.get("parameters", []):
                        if param.get("name") == "check" and param.get("in") == "path":
                            param["schema"]["enum"] = check_names
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _security(need: str | None, tokens: TokenCheck) -> list[dict[str, list[str]]] | None:
    """Return an operation's security requirement; `{}` first means a token is optional."""
    public = {"read": tokens.public_read, "metrics": tokens.metrics_public}
    if need is None:
        return None
    if need != "token" and public[need]:
        return [{}, {BEARER: []}]
    return [{BEARER: []}]


def _route_needs(app: FastAPI) -> dict[tuple[str, str], str]:
    """Return the strongest token check each documented route depends on."""
    rank = {"read": 1, "metrics": 1, "token": 2}
    out: dict[tuple[str, str], str] = {}
    for route in _flat_routes(app):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        found = [n for n in _calls(route.dependant) if n in _NEEDS]
        if not found:
            continue
        need = max((_NEEDS[n] for n in found), key=rank.__getitem__)
        for method in route.methods or ():
            out[(method.lower(), route.path_format)] = need
    return out


def _flat_routes(app: FastAPI) -> list[Any]:
    """Return every route with the prefix and dependencies of the routers that include it."""
    # Included routers are kept as branches; this is how FastAPI walks them for the schema.
    return list(iter_route_contexts(app.routes))


def _calls(dependant: Dependant) -> list[str]:
    names = []
    for dep in dependant.dependencies:
        names.append(getattr(dep.call, "__name__", ""))
        names.extend(_calls(dep))
    return names
