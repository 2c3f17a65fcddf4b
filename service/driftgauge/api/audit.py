"""The run ledger, canaries, vocabulary and volume as request handlers reach them.

`Audit` is what `app.audit.open_audit` opened (on `app.state.audit`); `audit_router` serves
the /ledger, /canary and volume routes over it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from fastapi import APIRouter, HTTPException, Request, status
from prometheus_client.core import Metric

from driftgauge.api.auth import TokenCheck
from driftgauge.background import survive
from driftgauge.canary.metrics import CanaryMetrics
from driftgauge.canary.router import canary_router
from driftgauge.canary.service import CanaryService
from driftgauge.core.errors import StateError
from driftgauge.ledger.hooks import ReconcileOnClose
from driftgauge.ledger.metrics import LedgerMetrics
from driftgauge.ledger.router import ledger_router
from driftgauge.ledger.service import LedgerService
from driftgauge.signals.metrics import SignalsMetrics
from driftgauge.signals.router import signals_router
from driftgauge.signals.service import SignalsService

log = logging.getLogger("driftgauge.audit")


@dataclass
class Audit:
    """The services and collector parts beside reconciliation, sharing one state pool."""

    ledger: LedgerService
    reconcile_on_close: ReconcileOnClose
    canary: CanaryService
    signals: SignalsService
    ledger_metrics: LedgerMetrics
    canary_metrics: CanaryMetrics
    signals_metrics: SignalsMetrics

    @property
    def parts(self) -> list[Callable[[], Iterable[Metric]]]:
        """Return the collector parts to add to the /metrics registry."""
        return [self.ledger_metrics, self.canary_metrics, self.signals_metrics]

    async def tick(self, now: datetime | None = None, *, judge: bool = True) -> None:
        """Judge the ledger's windows, then reload every part (a failed reload keeps its data).

        `judge` False only reloads: another replica judges this period's windows.
        """
        if judge:
            with survive("audit", "judge ledger windows"):
                try:
                    await self.ledger.evaluate_all(now)
                except StateError as exc:
                    log.warning("could not judge ledger windows", extra={"error": str(exc)})
        for part in (self.ledger_metrics, self.canary_metrics, self.signals_metrics):
            with survive("audit", f"reload {type(part).__name__}"):
                try:
                    await part.refresh()
                except StateError as exc:
                    log.warning("could not reload stored results", extra={"error": str(exc)})


def _audit(request: Request) -> Audit:
    audit: Audit | None = getattr(request.app.state, "audit", None)
    if audit is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the audit is not running")
    return audit


def _ledger_of(request: Request) -> LedgerService:
    return _audit(request).ledger


def _canary_of(request: Request) -> CanaryService:
    return _audit(request).canary


def _signals_of(request: Request) -> SignalsService:
    return _audit(request).signals


def audit_router(tokens: TokenCheck) -> APIRouter:
    """Return the /ledger, /canary and volume routes, finding the services on app.state.audit."""
    router = APIRouter()
    router.include_router(
        ledger_router(tokens.require, tokens.require_read, get_service=_ledger_of)
    )
    router.include_router(
        canary_router(tokens.require, tokens.require_read, get_service=_canary_of)
    )
    router.include_router(signals_router(tokens.require_read, get_service=_signals_of))
    return router
