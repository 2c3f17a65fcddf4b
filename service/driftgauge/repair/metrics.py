"""Collector part: watermark, backfill and repair-breach series (see docs/metrics.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client.core import Metric

from driftgauge.metrics.families import Families
from driftgauge.pg.calls import PgCalls
from driftgauge.repair.backfill_rows import ORDER
from driftgauge.repair.breaches import KINDS


@dataclass
class RepairSnapshot:
    """What the repair series show, read from the state database in one go."""

    watermarks: list[Any] = field(default_factory=list)
    backfills: dict[str, int] = field(default_factory=dict)
    oldest_open: dict[str, datetime] = field(default_factory=dict)
    refusals: dict[tuple[str, str], int] = field(default_factory=dict)
    active: list[Any] = field(default_factory=list)
    recorded: dict[str, int] = field(default_factory=dict)


class RepairMetrics:
    """Yield the repair families from the latest snapshot; a failed refresh keeps it."""

    def __init__(self, calls: PgCalls, clock: Callable[[], datetime]) -> None:
        self.calls = calls
        self.clock = clock
        self.snap: RepairSnapshot | None = None

    async def refresh(self) -> None:
        """Reload the snapshot (raises StateError and keeps the old one if it fails)."""
        snap = RepairSnapshot()
        async with self.calls.conn("read repair metrics") as conn:
            snap.watermarks = list(
                await conn.fetch("SELECT pipeline, processed_through, advanced_at FROM watermarks")
            )
            for r in await conn.fetch(
                "SELECT status, count(*) AS n FROM backfills GROUP BY status"
            ):
                snap.backfills[r["status"]] = int(r["n"])
            for r in await conn.fetch(
                "SELECT check_name, min(planned_at) AS at FROM backfills"
                " WHERE status <> 'closed' GROUP BY check_name"
            ):
                snap.oldest_open[r["check_name"]] = r["at"]
            for r in await conn.fetch(
                "SELECT step, rule, count(*) AS n FROM backfill_events"
                " WHERE outcome = 'refused' GROUP BY step, rule"
            ):
                snap.refusals[(r["step"], r["rule"])] = int(r["n"])
            snap.active = list(
                await conn.fetch("SELECT kind, subject, facts FROM repair_breaches WHERE active")
            )
            for r in await conn.fetch(
                "SELECT kind, count(*) AS n FROM repair_breaches GROUP BY kind"
            ):
                snap.recorded[r["kind"]] = int(r["n"])
        self.snap = snap

    def __call__(self) -> Iterable[Metric]:
        """Return the families for one scrape (none before the first load)."""
        if self.snap is None:
            return []
        snap, now = self.snap, self.clock().timestamp()
        fam = Families()
        # In this order: a scrape lists the families as they were made.
        _watermark_families(fam, snap, now)
        _backfill_families(fam, snap, now)
        _breach_families(fam, snap)
        return fam.all()


def _watermark_families(fam: Families, snap: RepairSnapshot, now: float) -> None:
    """Add each pipeline's processed_through, its age and its last advance."""
    through = fam.gauge(
        "driftgauge_watermark_processed_through_timestamp_seconds",
        "The pipeline's processed_through: every partition at or before it is trusted.",
        "pipeline",
    )
    age = fam.gauge(
        "driftgauge_watermark_age_seconds", "Seconds from processed_through to now.", "pipeline"
    )
    advanced = fam.gauge(
        "driftgauge_watermark_last_advance_timestamp_seconds",
        "When the watermark last moved forward.",
        "pipeline",
    )
    for w in snap.watermarks:
        through.add_metric([w["pipeline"]], w["processed_through"].timestamp())
        age.add_metric([w["pipeline"]], now - w["processed_through"].timestamp())
        advanced.add_metric([w["pipeline"]], w["advanced_at"].timestamp())


def _backfill_families(fam: Families, snap: RepairSnapshot, now: float) -> None:
    """Add backfills by status, the oldest open one per check and the refused steps."""
    backfills = fam.gauge("driftgauge_backfills", "Backfills by lifecycle status.", "status")
    for status in ORDER:
        backfills.add_metric([status], snap.backfills.get(status, 0))
    open_for = fam.gauge(
        "driftgauge_backfill_open_seconds",
        "Seconds since the oldest backfill of the check that is not closed was planned.",
        "check",
    )
    for check, at in sorted(snap.oldest_open.items()):
        open_for.add_metric([check], now - at.timestamp())
    refused = fam.counter(
        "driftgauge_backfill_refusals",
        "Backfill steps refused, by step and rule.",
        "step",
        "rule",
    )
    for (step, rule), n in sorted(snap.refusals.items()):
        refused.add_metric([step, rule], n)


def _breach_families(fam: Families, snap: RepairSnapshot) -> None:
    """Add the repair breaches that hold, a silent change's rows and amounts, and the tallies."""
    breach = fam.gauge(
        "driftgauge_repair_breach", "1 per repair breach that holds now.", "kind", "subject"
    )
    silent = fam.gauge(
        "driftgauge_silent_change_rows",
        "Rows of a signed partition that changed outside an announced backfill: what the"
        " consumer read (before) and what it holds now (after).",
        "check",
        "consumer",
        "partition",
        "side",
    )
    amount = fam.gauge(
        "driftgauge_silent_change_amount",
        "Signed totals of a partition that changed outside an announced backfill, by measure:"
        " what the consumer read (before) and what it holds now (after).",
        "check",
        "consumer",
        "partition",
        "measure",
        "side",
    )
    for b in snap.active:
        breach.add_metric([b["kind"], b["subject"]], 1)
        if b["kind"] == "silent_change":
            facts = json.loads(b["facts"])
            labels = [facts["check"], facts["consumer"], facts["start"]]
            for side in ("before", "after"):
                silent.add_metric([*labels, side], int(facts[side]["count"]))
                # The amounts, so equal counts with a changed total still read as a change.
                for measure, value in facts[side].get("measures", {}).items():
                    amount.add_metric([*labels, measure, side], float(value))
    recorded = fam.counter(
        "driftgauge_repair_breaches", "Repair breaches recorded, by kind.", "kind"
    )
    for kind in KINDS:
        recorded.add_metric([kind], snap.recorded.get(kind, 0))
