"""The APScheduler trigger for a cron expression (kept out of `cron`, which config loads)."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

from apscheduler.triggers.base import BaseTrigger

from driftgauge.cron import Cron, parse


class CronTrigger(BaseTrigger):  # type: ignore[misc]
    """An APScheduler trigger firing a parsed cron expression in a time zone."""

    __slots__ = ("cron", "timezone")

    def __init__(self, cron: Cron, timezone: tzinfo) -> None:
        self.cron = cron
        self.timezone = timezone

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        """Return the next fire time after the previous one (or at or after `now`)."""
        start = now
        if previous_fire_time is not None:
            start = min(now, previous_fire_time + timedelta(microseconds=1))
            if start == previous_fire_time:
                start += timedelta(microseconds=1)
        fire = self.cron.next_fire(start, self.timezone)
        return fire.astimezone(self.timezone) if fire is not None else None

    def __str__(self) -> str:
        return f"cron[{self.cron.text!r}]"


def trigger_for(text: str, timezone: tzinfo) -> CronTrigger:
    """Return the APScheduler trigger for a cron expression in `timezone`."""
    return CronTrigger(parse(text), timezone)
