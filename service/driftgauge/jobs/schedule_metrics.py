"""The schedule's own series: per check and trigger, when it began, is next due, and missed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from prometheus_client.core import Metric

from driftgauge.jobs.schedule import JobSpec
from driftgauge.metrics.families import Spec, build
from driftgauge.metrics.snapshot import CheckSnapshot

MAX_COUNTED = 1000
"""Missed ticks are counted up to this many: beyond it the number pages just the same."""
LATE = timedelta(minutes=10)
"""How long a due tick may wait for the run before it (the longest, an hour) to begin."""

SCHEDULE = {
    "started": Spec(
        "driftgauge_schedule_last_started_timestamp_seconds",
        "When the latest run of this check and trigger began.",
        ("check", "trigger"),
    ),
    "completed": Spec(
        "driftgauge_schedule_last_completed_timestamp_seconds",
        "When the latest completed run of this check and trigger finished.",
        ("check", "trigger"),
    ),
    "next_due": Spec(
        "driftgauge_schedule_next_due_timestamp_seconds",
        "When this check's schedule of this trigger next falls due.",
        ("check", "trigger"),
    ),
    "missed": Spec(
        "driftgauge_schedule_missed_ticks",
        "Scheduled times of this trigger since its latest run began that began no run.",
        ("check", "trigger"),
    ),
}


def missed_ticks(spec: JobSpec, since: datetime, now: datetime) -> int:
    """Return how many of the spec's times after `since` are overdue at `now` with no run."""
    late = max(LATE, min(spec.period(now), timedelta(hours=1)))
    count, t = 0, spec.next_fire(since)
    while t is not None and t <= now - late and count < MAX_COUNTED:
        count += 1
        t = spec.next_fire(t)
    return count


def _since(spec: JobSpec, times: Mapping[str, tuple[datetime, datetime | None]]) -> datetime | None:
    """Return when the spec's trigger last began, or the check's first run if it never did.

    A recent tick that a full run subsumed began no run of its own: the full run stands
    for it.
    """
    kinds = ("recent", "full") if spec.kind == "recent" else (spec.kind,)
    began = [times[k][0] for k in kinds if k in times]
    if began:
        return max(began)
    first = times.get("")
    return first[0] if first is not None else None


@dataclass(frozen=True)
class TriggerFacts:
    """One check's schedule of one trigger, as /metrics and the API show it."""

    trigger: str
    last_started: datetime | None
    last_completed: datetime | None
    next_due: datetime | None
    missed: int | None
    """None before the check has any run to count from."""


def trigger_facts(
    spec: JobSpec, times: Mapping[str, tuple[datetime, datetime | None]], now: datetime
) -> TriggerFacts:
    """Return what is known of the spec's schedule from the check's runs per trigger."""
    started, completed = times.get(spec.kind, (None, None))
    since = _since(spec, times)
    return TriggerFacts(
        spec.kind,
        started,
        completed,
        spec.next_fire(now),
        None if since is None else missed_ticks(spec, since, now),
    )


def schedule_part(
    snapshots: Callable[[], Mapping[str, CheckSnapshot]],
    specs: Sequence[JobSpec],
    clock: Callable[[], datetime],
) -> Callable[[], Iterable[Metric]]:
    """Return the part that yields the per-check, per-trigger schedule series."""

    def collect() -> Iterable[Metric]:
        fam = build(SCHEDULE)
        now, snaps = clock(), snapshots()
        for spec in specs:
            labels = [spec.check, spec.kind]
            snap = snaps.get(spec.check)
            # A check not read yet has only its next due time: no number beats a wrong one.
            facts = trigger_facts(spec, snap.trigger_times if snap else {}, now)
            for key, at in (
                ("next_due", facts.next_due),
                ("started", facts.last_started),
                ("completed", facts.last_completed),
            ):
                if at is not None:
                    fam[key].add_metric(labels, at.timestamp())
            if facts.missed is not None:
                fam["missed"].add_metric(labels, facts.missed)
        yield from fam.values()

    return collect
