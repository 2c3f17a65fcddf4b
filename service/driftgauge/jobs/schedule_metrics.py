"""The schedule's own series: per check and trigger, when it began, is next due, and missed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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
            due = spec.next_fire(now)
            if due is not None:
                fam["next_due"].add_metric(labels, due.timestamp())
            snap = snaps.get(spec.check)
            if snap is None:
                continue  # not read yet: no number rather than a wrong one
            times = snap.trigger_times
            if spec.kind in times:
                started, completed = times[spec.kind]
                fam["started"].add_metric(labels, started.timestamp())
                if completed is not None:
                    fam["completed"].add_metric(labels, completed.timestamp())
            since = _since(spec, times)
            if since is not None:
                fam["missed"].add_metric(labels, missed_ticks(spec, since, now))
        yield from fam.values()

    return collect
