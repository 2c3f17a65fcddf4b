"""What the app's lifespan opened, as request handlers reach it through app.state."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from fastapi import Request
from prometheus_client.registry import CollectorRegistry

from driftgauge.api.audit import Audit
from driftgauge.api.auth import TokenCheck
from driftgauge.config.frozen import Config
from driftgauge.jobs.adapters import AdapterPool
from driftgauge.jobs.runtime import JobRuntime
from driftgauge.jobs.ticks import TickRunner
from driftgauge.metrics.snapshot import SnapshotCache
from driftgauge.repair.service import Repair
from driftgauge.retention.job import RetentionJob
from driftgauge.state.store import StateStore


@dataclass
class Runtime:
    """Everything the lifespan opened; request handlers reach it through app.state."""

    config: Config
    state: StateStore
    adapters: AdapterPool
    snapshots: SnapshotCache
    ticks: TickRunner
    jobs: JobRuntime
    registry: CollectorRegistry
    tokens: TokenCheck
    scheduler_enabled: bool
    clock: Callable[[], datetime]
    audit: Audit
    repair: Repair
    retention: RetentionJob
    live: asyncio.Semaphore
    """Slots for live drill-downs (api.live_concurrency)."""


def runtime(request: Request) -> Runtime:
    """Return the app's runtime (set by the lifespan)."""
    rt: Runtime = request.app.state.runtime
    return rt
