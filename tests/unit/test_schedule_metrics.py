"""The schedule series on hand-built snapshots: last began, next due, missed ticks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import generate_latest

from driftgauge.jobs.schedule import JobSpec
from driftgauge.jobs.schedule_metrics import missed_ticks, schedule_part
from driftgauge.metrics.collector import build_registry
from driftgauge.metrics.snapshot import CheckSnapshot

from .metrics_doc import exposed
from .test_metrics import _documented

NOW = datetime(2026, 3, 10, 3, 30, tzinfo=UTC)
RECENT = JobSpec("c", "recent", every=timedelta(hours=1))
FULL = JobSpec("c", "full", cron="0 3 * * *")


def sample(
    times: dict[str, tuple[datetime, datetime | None]], name: str, trigger: str
) -> float | None:
    snap = CheckSnapshot(check="c", trigger_times=times)
    part = schedule_part(lambda: {"c": snap}, [RECENT, FULL], lambda: NOW)
    return build_registry([part]).get_sample_value(name, {"check": "c", "trigger": trigger})


def test_a_full_pass_that_never_ran_while_recent_ticks_did_counts_as_missed() -> None:
    # Recent ticks ran every hour for four days; the nightly full pass never began.
    first = NOW - timedelta(days=4)
    times = {
        "recent": (NOW - timedelta(minutes=30), NOW - timedelta(minutes=29)),
        "": (first, None),
    }
    # 03-07, 03-08 and 03-09 at 03:00; tonight's 03:00 is still within its hour of wait.
    assert sample(times, "driftgauge_schedule_missed_ticks", "full") == 3
    assert sample(times, "driftgauge_schedule_missed_ticks", "recent") == 0
    assert sample(times, "driftgauge_schedule_last_started_timestamp_seconds", "full") is None


def test_a_recent_tick_subsumed_by_a_full_run_is_not_missed() -> None:
    full_began = NOW - timedelta(minutes=30)
    times = {
        "recent": (NOW - timedelta(hours=3, minutes=59), None),
        "full": (full_began, full_began + timedelta(minutes=5)),
        "": (NOW - timedelta(days=2), None),
    }
    assert sample(times, "driftgauge_schedule_missed_ticks", "recent") == 0
    assert sample(times, "driftgauge_schedule_missed_ticks", "full") == 0
    done = sample(times, "driftgauge_schedule_last_completed_timestamp_seconds", "full")
    assert done == (full_began + timedelta(minutes=5)).timestamp()


def test_next_due_is_published_before_any_run_and_missed_only_once_read() -> None:
    part = schedule_part(lambda: {}, [RECENT, FULL], lambda: NOW)
    v = build_registry([part]).get_sample_value
    assert v(
        "driftgauge_schedule_next_due_timestamp_seconds", {"check": "c", "trigger": "full"}
    ) == (datetime(2026, 3, 11, 3, tzinfo=UTC).timestamp())
    assert v("driftgauge_schedule_missed_ticks", {"check": "c", "trigger": "full"}) is None


def test_missed_ticks_wait_for_their_grace_and_stop_counting_at_a_bound() -> None:
    assert missed_ticks(RECENT, NOW - timedelta(minutes=61), NOW) == 0  # 03:00 still in its wait
    assert missed_ticks(RECENT, NOW - timedelta(hours=3), NOW) == 2
    every_minute = JobSpec("c", "recent", every=timedelta(minutes=1))
    assert missed_ticks(every_minute, NOW - timedelta(days=30), NOW) == 1000


def test_exposition_matches_the_documented_schedule_section() -> None:
    times = {"recent": (NOW, NOW), "full": (NOW, NOW), "": (NOW, None)}
    part = schedule_part(
        lambda: {"c": CheckSnapshot(check="c", trigger_times=times)}, [RECENT, FULL], lambda: NOW
    )
    text = generate_latest(build_registry([part])).decode()
    assert exposed(text) == _documented(("Schedules",))
