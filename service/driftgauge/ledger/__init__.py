"""The run ledger: what each sync-job run was handed and where every row ended up."""

from driftgauge.ledger.client import LedgerClient, LedgerClientError, SyncLedgerClient
from driftgauge.ledger.hooks import ReconcileOnClose
from driftgauge.ledger.metrics import LedgerMetrics
from driftgauge.ledger.router import ledger_router
from driftgauge.ledger.service import LedgerService, job_settings, ledger_exclusions
from driftgauge.ledger.store import LedgerStore

__all__ = [
    "LedgerClient",
    "LedgerClientError",
    "LedgerMetrics",
    "LedgerService",
    "LedgerStore",
    "ReconcileOnClose",
    "SyncLedgerClient",
    "job_settings",
    "ledger_exclusions",
    "ledger_router",
]
