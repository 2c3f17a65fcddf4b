"""Run the fault bench: a shared healthy history, then one scenario per fault, ablation and rate.

The healthy days before onset are the same in every scenario, so they are simulated once
(with every check) and each scenario starts from a copy of those stores: its database
(tasks and driftgauge's state) cloned from the template, its index cloned with `_clone`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from faults import checks as bench_checks
from faults.detectors import Outcome, score
from faults.faults import Fault, VocabularyDrift, by_name
from faults.scenario import Classic, Plan, Simulation
from faults.world import (
    Shape,
    SimClock,
    Stores,
    clone_stores,
    create_stores,
    day_start,
    drop_stores,
    index_conversations,
    os_client,
    run_tag,
    unique_stores,
)

log = logging.getLogger("fault_bench")
FAULT_NAMES = (
    "permission_loss",
    "key_rename",
    "vocabulary_drift",
    "source_ttl",
    "disk_full",
    "scroll_429",
    "retry_merge",
    "retry_append",
    "lost_update",
)
SWEEP = (0.01, 0.02, 0.03, 0.04, 0.05, 0.10)
ALL_CHECKS = (bench_checks.MAIN, *(v.name for v in bench_checks.VARIANTS), bench_checks.SEED_CHECK)


@dataclass(frozen=True)
class BenchSpec:
    """What to run: days, onset, the faults, the ablations and the drift sweep."""

    days: int = 40
    onset: int = 20
    scale: float = 1.0
    faults: tuple[str, ...] = FAULT_NAMES
    healthy: bool = True
    ablations: bool = True
    sweep: tuple[float, ...] = SWEEP
    drift_rate: float = 0.25
    parallel: int = 2
    keep: bool = False

    @property
    def shape(self) -> Shape:
        """Return the pipeline's proportions at this scale."""
        return Shape().scaled(self.scale)


@dataclass
class BenchResult:
    """Every scenario's outcome, and how long the bench took."""

    spec: BenchSpec
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    started: datetime | None = None
    wall_seconds: float = 0.0


def checks_for(fault: str, spec: BenchSpec) -> tuple[str, ...]:
    """Return the checks a fault's scenario reconciles: the full check and its ablations."""
    if not spec.ablations:
        return (bench_checks.MAIN,)
    blind = [v.name for v in bench_checks.VARIANTS if v.seed_blind_to == fault]
    if fault in ("healthy", "retry_merge"):
        # Every variant must stay quiet on both (one of them never can).
        return ALL_CHECKS
    return (bench_checks.MAIN, *blind, bench_checks.SEED_CHECK)


def plans(spec: BenchSpec) -> list[Plan]:
    """Return every scenario that continues from the shared healthy history."""
    out = []
    if spec.healthy:
        out.append(Plan("healthy", Fault(), checks_for("healthy", spec), spec.onset))
    for name in spec.faults:
        fault = by_name(name, spec.drift_rate)
        out.append(Plan(name, fault, checks_for(name, spec), spec.onset))
    for rate in spec.sweep:
        # Drift only reaches the days the job syncs after onset: their own windows suffice.
        out.append(
            Plan(
                f"drift_{round(rate * 100)}pct",
                VocabularyDrift(rate),
                (bench_checks.MAIN, bench_checks.SEED_CHECK),
                spec.onset,
                full_pass=False,
                canary=False,
            )
        )
    return out


def prefix_checks(spec: BenchSpec, scenarios: Sequence[Plan]) -> tuple[str, ...]:
    """Return every check any scenario uses (their history must exist before onset)."""
    used = {c for p in scenarios for c in p.checks}
    return tuple(c for c in ALL_CHECKS if c in used)


async def run_bench(spec: BenchSpec) -> BenchResult:
    """Run the shared history, then every scenario; drop the stores unless asked to keep them."""
    result = BenchResult(spec, started=datetime.now().astimezone())
    wall = time.perf_counter()
    tag = run_tag()
    scenarios = plans(spec)
    prefix = unique_stores(tag, "history")
    made: list[Stores] = [prefix]
    try:
        await create_stores(prefix)
        await index_all_conversations(prefix, spec.days, spec.shape)
        healthy = Plan("history", Fault(), prefix_checks(spec, scenarios), spec.onset)
        clock = SimClock(day_start(0))
        t0 = time.perf_counter()
        async with Simulation(
            healthy,
            prefix,
            bench_checks.load(prefix, healthy.checks),
            spec.shape,
            clock,
            alarm_from=day_start(0),
        ) as sim:
            await sim.run_days(0, spec.onset)
            history = sim.classic.copy()
        result.seconds["history"] = time.perf_counter() - t0
        log.info("healthy history done", extra={"seconds": round(result.seconds["history"])})
        gate = asyncio.Semaphore(max(1, spec.parallel))

        async def one(plan: Plan) -> None:
            stores = unique_stores(tag, plan.name)
            async with gate:
                made.append(stores)
                t = time.perf_counter()
                await clone_stores(prefix, stores)
                result.outcomes[plan.name] = await _continue(plan, stores, spec, history.copy())
                result.seconds[plan.name] = time.perf_counter() - t
                log.info(
                    "scenario done",
                    extra={"scenario": plan.name, "seconds": round(result.seconds[plan.name])},
                )
                if not spec.keep:
                    await drop_stores(stores)
                    made.remove(stores)

        await asyncio.gather(*(one(p) for p in scenarios))
    finally:
        if not spec.keep:
            for stores in made:
                try:
                    await drop_stores(stores)
                except Exception as exc:
                    log.warning(
                        "could not drop stores",
                        extra={"stores": stores.database, "error": repr(exc)},
                    )
    result.wall_seconds = time.perf_counter() - wall
    return result


async def index_all_conversations(stores: Stores, days: int, shape: Shape) -> None:
    """Index every simulated day's conversations up front (another writer, its own identity).

    Indexing them before their reviews complete keeps that writer out of the faults that
    block the index for the sync job.
    """
    client = os_client()
    try:
        for day in range(days):
            await index_conversations(client, stores.index, Fault().tasks(day, shape, 0))
    finally:
        await client.close()


async def _continue(plan: Plan, stores: Stores, spec: BenchSpec, history: Classic) -> Outcome:
    """Simulate a scenario from onset to the last day and score its detectors."""
    onset = day_start(spec.onset)
    # The healthy baseline is judged over all its days; a fault from its onset on.
    since = day_start(0) if plan.name == "healthy" else onset
    clock = SimClock(onset)
    config = bench_checks.load(stores, plan.checks)
    async with Simulation(
        plan, stores, config, spec.shape, clock, alarm_from=since, classic=history
    ) as sim:
        await sim.run_days(spec.onset, spec.days)
        return await score(
            sim, plan.name, plan.fault.name, onset, since, day_start(spec.days), plan.fault.damage
        )
