"""Prometheus metrics built at scrape time from the latest stored results."""

from driftgauge.metrics.collector import (
    CollectorPart,
    PartsCollector,
    build_registry,
    process_part,
    reconciliation_part,
)
from driftgauge.metrics.history import history_part
from driftgauge.metrics.snapshot import CheckSnapshot, SnapshotCache, load_check, state_part

__all__ = [
    "CheckSnapshot",
    "CollectorPart",
    "PartsCollector",
    "SnapshotCache",
    "build_registry",
    "history_part",
    "load_check",
    "process_part",
    "reconciliation_part",
    "state_part",
]
