"""Bind a request id to each request's logs and write one access line per request."""

from __future__ import annotations

import logging
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from driftgauge.logs import log_context

log = logging.getLogger("driftgauge.api")
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class RequestContext:
    """Bind a request id to the logs of each request, echo it, and log one access line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request with its id bound."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        rid = given[:64] if given.isprintable() and given else uuid.uuid4().hex
        started = time.monotonic()
        code = 500

        async def send_with_id(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode("latin-1"))]
            await send(message)

        with log_context(request_id=rid):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                # Probes and scrapes come every few seconds: their lines only at DEBUG.
                quiet = scope.get("path") in QUIET_PATHS and code < 400
                log.log(
                    logging.DEBUG if quiet else logging.INFO,
                    "request",
                    extra={
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": code,
                        "duration_ms": round((time.monotonic() - started) * 1000, 1),
                    },
                )
