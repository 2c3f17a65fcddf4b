"""Background loops survive one bad item: it is logged, counted and the loop goes on."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from prometheus_client.core import Metric

from driftgauge import background
from driftgauge.api.audit import Audit
from driftgauge.canary.service import CanaryService
from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.jobs.recurring import canary_jobs, refresh_job, signals_jobs
from driftgauge.jobs.runtime import Job, JobRuntime
from driftgauge.ledger.hooks import ReconcileOnClose
from driftgauge.ledger.models import Counts, RunOut
from driftgauge.retention.job import RetentionJob
from driftgauge.signals.service import SignalsService

from .config_text import config_head

NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
S = TypeVar("S")
CONFIG = (
    config_head(s="postgres", r="opensearch")
    + """
  c:
    source: {store: s, table: t, key: k, time: ts}
    reader: {store: r, index: i, key: k, time: ts}
    fields: {label: string}
    vocabulary: {label: {accepted: [a, b]}}
    ledger: {job: sync, settle: 1m}
"""
)


def _value(loop: str) -> float:
    fams: list[Metric] = list(background.background_part())
    return next(s.value for s in fams[0].samples if s.labels == {"loop": loop})


def test_an_unexpected_error_is_counted_logged_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = background.errors("retention")
    with background.survive("retention", "one item", check="c"):
        raise KeyError("bad row")
    assert background.errors("retention") == before + 1 == _value("retention")
    [rec] = [r for r in caplog.records if r.name == "driftgauge.background"]
    assert rec.levelname == "ERROR" and rec.exc_info is not None
    assert (rec.loop, rec.item, rec.check) == ("retention", "one item", "c")
    assert "KeyError" in rec.error


def test_cancellation_is_never_swallowed() -> None:
    with pytest.raises(asyncio.CancelledError), background.survive("audit", "item"):
        raise asyncio.CancelledError


def raising(error: Exception) -> Callable[..., Awaitable[object]]:
    """Return a stand-in for a source or reconcile call that raises `error` whatever it is given."""

    async def call(*_: object) -> object:
        raise error

    return call


def unstored(service: Callable[..., S], checks: Mapping[str, Check], source: object) -> S:
    """Return a signals or canary service reading `source`, with no state store to reach."""
    return service(checks, store=None, source=source, clock=lambda: NOW)


async def errors_firing(loop: str, job_id: str, jobs: list[Job]) -> int:
    """Return how many more errors `loop` counts after the job `job_id` of `jobs` fires once."""
    runtime = JobRuntime(lambda: NOW)
    runtime.add(*jobs)
    before = background.errors(loop)
    await runtime.fire(job_id)
    return background.errors(loop) - before


async def test_a_signals_measurement_that_raises_is_counted() -> None:
    cfg = load_text(CONFIG)
    service = unstored(SignalsService, cfg.checks, raising(ValueError("malformed row")))
    assert await errors_firing("signals", "c:signals", signals_jobs(cfg.checks, service)) == 1


async def test_a_ledger_reconcile_that_raises_is_counted() -> None:
    cfg = load_text(CONFIG)

    async def broken(check: str, start: datetime, end: datetime) -> object:
        raise RuntimeError("bug")

    hook = ReconcileOnClose(cfg.checks, broken, clock=lambda: NOW)
    run = RunOut(
        id=1,
        job="sync",
        client_run_id=None,
        window_start=NOW - timedelta(days=1),
        window_end=NOW,
        window_day=(NOW - timedelta(days=1)).date(),
        input_rows=1,
        opened_at=NOW,
        closed_at=NOW,
        status="success",
        outcomes=Counts(),
    )
    await hook(run)
    before = background.errors("ledger_reconcile")
    assert await hook.run_due(NOW + timedelta(minutes=2))
    assert background.errors("ledger_reconcile") == before + 1


def test_the_series_is_the_documented_one() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text("utf-8")
    section = docs.split("## Background loops", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"\| `(driftgauge_\w+)` \| (\w+) \| `(\w+)` \(([^)]*)\)", section)
    assert len(rows) == 1
    name, kind, label, values = rows[0]
    fam = next(iter(background.background_part()))
    assert (name, kind) == (fam.name + "_total", fam.type)
    assert {label} == set().union(*(s.labels for s in fam.samples))
    assert re.findall(r"`(\w+)`", values) == list(background.LOOPS)


CANARY = CONFIG.replace(
    "    reader: {store: r, index: i, key: k, time: ts}\n",
    "    reader:\n      store: r\n      index: i\n      key: k\n      time: ts\n"
    "      filter: {bool: {must_not: [{exists: {field: driftgauge_canary}}]}}\n"
    "    canary: {store: r, every: 1h}\n",
)


async def test_a_canary_whose_key_picker_raises_is_counted() -> None:
    cfg = load_text(CANARY)
    service = unstored(
        CanaryService, cfg.checks, raising(RuntimeError("bug in the source adapter"))
    )
    assert await errors_firing("canary", "c:canary", canary_jobs(cfg.checks, service)) == 1


async def test_a_prune_that_raises_is_counted_and_reported_as_none() -> None:
    job = RetentionJob(
        state=None,  # type: ignore[arg-type]
        config=load_text(CONFIG),
        clock=lambda: NOW,
    )
    before = background.errors("retention")
    assert await job.run_once() is None
    assert background.errors("retention") == before + 1


class Flaky:
    """A snapshot cache whose first reload raises, as a malformed stored run would."""

    def __init__(self) -> None:
        self.calls = 0
        self.second = asyncio.Event()

    async def refresh(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ValueError("a run row that does not decode")
        self.second.set()


async def test_the_refresh_loop_goes_on_after_a_bad_reload() -> None:
    flaky = Flaky()
    before = background.errors("snapshot_refresh")
    jobs = JobRuntime()
    jobs.add(refresh_job(flaky, 0.01))  # type: ignore[arg-type]
    jobs.start()
    try:
        await asyncio.wait_for(flaky.second.wait(), 5)
    finally:
        await jobs.stop()
    assert background.errors("snapshot_refresh") == before + 1


class Broken:
    """A ledger or metrics part that fails with a bug, not a state-database error."""

    async def evaluate_all(self, now: object = None) -> None:
        raise TypeError("bug")

    async def refresh(self) -> None:
        raise TypeError("bug")


async def test_an_audit_tick_survives_every_part_failing() -> None:
    broken = Broken()
    audit = Audit(
        ledger=broken,  # type: ignore[arg-type]
        reconcile_on_close=None,  # type: ignore[arg-type]
        canary=None,  # type: ignore[arg-type]
        signals=None,  # type: ignore[arg-type]
        ledger_metrics=broken,  # type: ignore[arg-type]
        canary_metrics=broken,  # type: ignore[arg-type]
        signals_metrics=broken,  # type: ignore[arg-type]
    )
    before = background.errors("audit")
    await audit.tick(NOW)
    assert background.errors("audit") == before + 4
