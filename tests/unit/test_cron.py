"""Cron fields mean what crontab(5) says, checked minute by minute against a reference."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.base import BaseTrigger

from driftgauge import cron
from driftgauge.configfile.loader import load_text
from driftgauge.jobs.cron_trigger import trigger_for
from driftgauge.jobs.recurring import canary_grid
from driftgauge.jobs.schedule import JobSpec

from .config_text import config_head

MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

EXPRESSIONS = [
    "0 3 * * 0",
    "0 3 * * 7",
    "0 3 * * sun",
    "30 2 * * 1-5",
    "0 12 * * mon-fri",
    "15 */6 * * *",
    "*/20 1-3 * * *",
    "0,30 2 * * *",
    "5 4 * * 5-7",
    "0 0 * * */2",
    "59 23 * * sat",
    "0 9 1 * *",
    "0 9 29-31 * *",
    "0 0 */10 * *",
    "45 2 * feb-mar *",
    "0 0 1 jan,mar,dec *",
    "7 7 * * 1/2",
    "0 * * * *",
    "@daily",
    "@weekly",
    "10/25 2 * * *",
]
SPANS = [  # (zone, first day, days): each spans a DST change or a month end
    ("Europe/Berlin", datetime(2026, 3, 25), 8),
    ("Europe/Berlin", datetime(2026, 10, 21), 8),
    ("America/New_York", datetime(2026, 3, 5), 6),
    ("America/New_York", datetime(2026, 10, 30), 5),
    ("Australia/Lord_Howe", datetime(2026, 4, 1), 6),  # a 30-minute DST change
    ("UTC", datetime(2028, 2, 25), 8),  # a leap February into March
    ("Asia/Kolkata", datetime(2026, 12, 28), 7),  # a year end, a :30 offset
]


def ref_values(text: str, low: int, high: int, names: list[str], base: int) -> set[int]:
    """Return the values a crontab field allows (an independent, plain reading)."""
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"(\*|\w+)(?:-(\w+))?(?:/(\d+))?", part)
        assert m is not None, part
        first, last, step = m.groups()

        def num(x: str) -> int:
            return names.index(x.lower()) + base if x.lower() in names else int(x)

        if first == "*":
            a, b = low, high
        else:
            a = num(first)
            b = num(last) if last else (high if step else a)
        out.update(range(a, b + 1, int(step or 1)))
    return out


@cache
def ref_matcher(expr: str) -> tuple[set[int], set[int], set[int] | None, set[int], set[int] | None]:
    """Return the reference field sets; None for an unrestricted day field."""
    expr = {"@daily": "0 0 * * *", "@weekly": "0 0 * * 0"}.get(expr, expr)
    mi, h, dom, mon, dow = expr.split()
    days = None if dom == "*" else ref_values(dom, 1, 31, [], 0)
    week = None if dow == "*" else {d % 7 for d in ref_values(dow, 0, 7, DAYS, 0)}
    return (
        ref_values(mi, 0, 59, [], 0),
        ref_values(h, 0, 23, [], 0),
        days,
        ref_values(mon, 1, 12, MONTHS, 1),
        week,
    )


@cache
def wall_clock(zone: str, first: datetime, days: int) -> list[tuple[datetime, list[datetime]]]:
    """Walk UTC minute by minute: each minute with the wall times it shows (all skipped ones
    too when the clocks jump forward)."""
    tz = ZoneInfo(zone)
    start = first.replace(tzinfo=tz).astimezone(UTC)
    out = []
    prev = None
    for i in range(days * 1440):
        u = start + timedelta(minutes=i)
        w = u.astimezone(tz).replace(tzinfo=None)
        walls = [w]
        if prev is not None and w - prev > timedelta(minutes=1):
            walls = [
                prev + timedelta(minutes=k)
                for k in range(1, (w - prev) // timedelta(minutes=1) + 1)
            ]
        out.append((u, walls))
        prev = w
    return out


def ref_fires(expr: str, zone: str, first: datetime, days: int) -> list[datetime]:
    """Fire each matching wall time once: at its first occurrence, or at the jump."""
    mi, h, dom, mon, dow = ref_matcher(expr)

    def match(w: datetime) -> bool:
        return (
            w.minute in mi
            and w.hour in h
            and w.month in mon
            and (dom is None or w.day in dom)
            and (dow is None or (w.weekday() + 1) % 7 in dow)
        )

    seen: set[datetime] = set()
    fires: list[datetime] = []
    for u, walls in wall_clock(zone, first, days):
        for wall in walls:
            if wall not in seen and match(wall):
                seen.add(wall)
                if not fires or fires[-1] != u:
                    fires.append(u)
    return fires


def our_fires(expr: str, zone: str, first: datetime, days: int) -> list[datetime]:
    tz = ZoneInfo(zone)
    trig = trigger_for(expr, tz)
    start = first.replace(tzinfo=tz).astimezone(UTC)
    end = start + timedelta(days=days)
    out = []
    t = trig.get_next_fire_time(None, start)
    while t is not None and t < end:
        out.append(t.astimezone(UTC))
        t = trig.get_next_fire_time(t, t + timedelta(seconds=1))
    return out


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_fire_times_match_the_reference_across_dst_and_month_ends(expr: str) -> None:
    for zone, first, days in SPANS:
        want = ref_fires(expr, zone, first, days)
        assert our_fires(expr, zone, first, days) == want, (expr, zone, first)


def test_day_of_week_zero_and_seven_are_sunday() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    for expr in ("0 3 * * 0", "0 3 * * 7", "0 3 * * sun", "@weekly"):
        fires = our_fires(expr, "Europe/Berlin", datetime(2026, 3, 1), 28)
        assert len(fires) == 4 and all(f.astimezone(berlin).weekday() == 6 for f in fires)
    weekdays = our_fires("0 3 * * 1-5", "UTC", datetime(2026, 3, 2), 7)
    assert [f.strftime("%a") for f in weekdays] == ["Mon", "Tue", "Wed", "Thu", "Fri"]


def test_the_full_pass_and_the_canary_run_on_the_day_named() -> None:
    weekly = JobSpec("c", "full", cron="0 3 * * 0", timezone=ZoneInfo("Europe/Berlin"))
    fire = weekly.latest_fire(datetime(2026, 3, 11, 12, tzinfo=UTC))  # a Wednesday
    assert fire == datetime(2026, 3, 8, 2, tzinfo=UTC)  # Sunday 03:00 CET
    config = load_text(
        config_head(src="postgres", dst="opensearch")
        + """
  reviews:
    source: {store: src, table: t, key: k, time: ts}
    reader:
      store: dst
      index: i
      key: k
      time: ts
      filter: {bool: {must_not: [{exists: {field: driftgauge_canary}}]}}
    canary: {store: dst, cron: "0 12 * * 1-5"}
"""
    )
    trig: BaseTrigger = canary_grid(config.checks["reviews"]).trigger()
    t = trig.get_next_fire_time(None, datetime(2026, 3, 7, tzinfo=UTC))  # a Saturday
    days = []
    for _ in range(5):
        days.append(t.strftime("%a"))
        t = trig.get_next_fire_time(t, t)
    assert days == ["Mon", "Tue", "Wed", "Thu", "Fri"]


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("0 99 * * 0", "hour: 99 is out of range 0-23"),
        ("60 * * * *", "minute: 60 is out of range 0-59"),
        ("0 0 0 * *", "day of month: 0 is out of range 1-31"),
        ("0 0 * 13 *", "month: 13 is out of range 1-12"),
        ("0 0 * * 8", "day of week: 8 is out of range 0-7"),
        ("0 0 * * funday", "day of week: 'funday' is not a number or a name sun-sat"),
        ("*/0 * * * *", "minute: step '0' in '*/0' must be a whole number of at least 1"),
        ("0 5-1 * * *", "hour: range '5-1' runs backwards"),
        ("* *", "expected 5 fields"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 1 * 1", "restricts both day of month (1) and day of week (1)"),
        ("@reboot", "expected 5 fields"),
    ],
)
def test_bad_expressions_are_rejected_with_the_reason(expr: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        cron.parse(expr)


def test_a_leap_day_cron_finds_its_next_fire_years_ahead() -> None:
    t = trigger_for("0 0 29 2 *", ZoneInfo("UTC")).get_next_fire_time(
        None, datetime(2097, 3, 1, tzinfo=UTC)
    )
    assert t == datetime(2104, 2, 29, tzinfo=UTC)  # 2100 is no leap year
