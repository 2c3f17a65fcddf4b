"""One prune of the state database: what retention allows, under a lock, logged in one line."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from driftgauge.config.frozen import Config
from driftgauge.retention.batches import BATCH, Batches, Family
from driftgauge.retention.families import audit_families, run_families
from driftgauge.state.store import StateStore

log = logging.getLogger("driftgauge.retention")
TABLES = (
    "runs",
    "buckets",
    "nodes",
    "key_samples",
    "ledger_runs",
    "ledger_batches",
    "ledger_outcomes",
    "ledger_keys",
    "ledger_breaches",
    "ledger_windows",
    "canary_results",
    "vocabulary_results",
    "volume_results",
)


@dataclass(frozen=True)
class PruneReport:
    """What one prune deleted (or, dry, would delete) per table, and the cutoffs it used."""

    dry_run: bool
    runs_before: datetime
    """Finished runs older than this went, unless something still reads them."""
    ledger_before: datetime
    """Ledger, canary and signals rows older than this went, unless still read."""
    deleted: dict[str, int] = field(default_factory=dict)
    skipped: bool = False
    """Another replica held the retention lock, so this one did nothing."""

    @property
    def total(self) -> int:
        """Return the rows deleted over every table."""
        return sum(self.deleted.values())


async def prune(
    state: StateStore, config: Config, now: datetime, *, dry_run: bool = False, batch: int = BATCH
) -> PruneReport:
    """Delete what retention allows (with `dry_run`, only count it) and log the counts.

    Replicas sharing the schema take turns through an advisory lock; one that finds it
    taken returns a skipped report at once.
    """
    retention = config.state.retention
    report = PruneReport(dry_run, now - retention.runs, now - retention.ledger)
    started = time.monotonic()
    if dry_run:
        deleted = await _sweep(state, config, now, report, Batches(state.calls, batch), True)
    else:
        async with state.prune_lock() as got:
            if not got:
                log.info(
                    "state prune skipped: another replica is pruning",
                    extra={"schema": state.schema},
                )
                return PruneReport(False, report.runs_before, report.ledger_before, skipped=True)
            deleted = await _sweep(state, config, now, report, Batches(state.calls, batch), False)
    done = PruneReport(dry_run, report.runs_before, report.ledger_before, deleted)
    log.info(
        "state prune (dry run)" if dry_run else "state pruned",
        extra={
            "schema": state.schema,
            "dry_run": dry_run,
            "deleted": deleted,
            "total": done.total,
            "runs_before": done.runs_before.isoformat(),
            "ledger_before": done.ledger_before.isoformat(),
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
        },
    )
    return done


async def _sweep(
    state: StateStore,
    config: Config,
    now: datetime,
    report: PruneReport,
    batches: Batches,
    dry_run: bool,
) -> dict[str, int]:
    families: list[Family] = [
        *await run_families(state, config.checks, now, report.runs_before),
        *audit_families(config, now, report.ledger_before),
    ]
    deleted = dict.fromkeys(TABLES, 0)
    for fam in families:
        counts = await (batches.count(fam) if dry_run else batches.delete(fam))
        for table, n in counts.items():
            deleted[table] += n
    return deleted
