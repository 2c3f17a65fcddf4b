"""Cron expressions as crontab(5) reads them, evaluated in a time zone.

Fields: minute 0-59, hour 0-23, day of month 1-31, month 1-12 or jan-dec, day of week
0-7 or sun-sat (0 and 7 are Sunday). Each field is `*` or a list of values and ranges
`a-b`, each optionally stepped (`*/15`, `1-5/2`, `10/20` = from 10 to the end by 20).
`@hourly`, `@daily`, `@weekly`, `@monthly` and `@yearly` are shorthands.

crontab(5) runs a job when *either* day field matches if both are restricted, which is
rarely what is meant; such expressions are rejected instead of guessed at.

Every matching local wall-clock time fires exactly once: a time that a DST change repeats
fires at its first occurrence, a time that it skips fires at the instant the clocks jump.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_FIELDS: list[tuple[str, int, int, dict[str, int]]] = [
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {n: i + 1 for i, n in enumerate(_MONTHS)}),
    ("day of week", 0, 7, {n: i for i, n in enumerate(_DAYS)}),
]
_SHORTHANDS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# The longest a valid expression waits between fires: 29 February skips up to 8 years.
_HORIZON_DAYS = 8 * 366 + 2
_MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression: the allowed values of each field."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int] | None
    """Days of the month, or None when unrestricted."""
    months: frozenset[int]
    weekdays: frozenset[int] | None
    """Days of the week (0 = Sunday), or None when unrestricted."""

    def matches_day(self, d: date) -> bool:
        """Return True if the cron fires on local day `d` at all."""
        if d.month not in self.months:
            return False
        if self.days is not None and d.day not in self.days:
            return False
        return self.weekdays is None or d.isoweekday() % 7 in self.weekdays

    def next_fire(self, after: datetime, tz: tzinfo) -> datetime | None:
        """Return the first fire instant at or after `after` (aware), in UTC."""
        start = after.astimezone(tz).date() - timedelta(days=1)
        for offset in range(_HORIZON_DAYS + 2):
            d = start + timedelta(days=offset)
            if not self.matches_day(d):
                continue
            last = _instant(d, self.hours[-1], self.minutes[-1], tz)
            if last < after:
                continue
            for hour in self.hours:
                for minute in self.minutes:
                    t = _instant(d, hour, minute, tz)
                    if t >= after:
                        return t
        return None


def parse(text: str) -> Cron:
    """Return the parsed expression, or raise ValueError saying what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError("must be a cron expression string such as '0 3 * * 0'")
    expr = _SHORTHANDS.get(text.strip().lower(), text)
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(parts)} in {text!r}"
        )
    values = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
    minutes, hours, days, months, weekdays = values
    weekdays = {d % 7 for d in weekdays}
    dom_star, dow_star = parts[2] == "*", parts[4] == "*"
    if not dom_star and not dow_star:
        raise ValueError(
            f"{text!r} restricts both day of month ({parts[2]}) and day of week ({parts[4]}); "
            "crontab would fire when either matches, which is rarely meant: set one of them "
            "to '*'"
        )
    cron = Cron(
        text,
        tuple(sorted(minutes)),
        tuple(sorted(hours)),
        None if dom_star else frozenset(days),
        frozenset(months),
        None if dow_star else frozenset(weekdays),
    )
    if cron.days is not None and not any(
        day <= _MONTH_DAYS[month - 1] for month in cron.months for day in cron.days
    ):
        raise ValueError(f"{text!r} never fires: no chosen month has the chosen day")
    return cron


def _field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        out |= _item(item, name, low, high, names)
    return out


def _item(item: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    span, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or int(step_text) < 1:
            raise ValueError(
                f"{name}: step {step_text!r} in {item!r} must be a whole number of at least 1"
            )
        step = int(step_text)
    if span == "*":
        first, last = low, high
    elif "-" in span:
        a, _, b = span.partition("-")
        first, last = _value(a, name, low, high, names), _value(b, name, low, high, names)
        if first > last:
            raise ValueError(f"{name}: range {span!r} runs backwards")
    else:
        first = _value(span, name, low, high, names)
        last = high if slash else first
    return set(range(first, last + 1, step))


def _value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    key = text.strip().lower()
    if key in names:
        return names[key]
    if not key.isdigit():
        ordered = sorted(names, key=names.__getitem__)
        hint = f" or a name {ordered[0]}-{ordered[-1]}" if ordered else ""
        raise ValueError(f"{name}: {text!r} is not a number{hint}")
    value = int(key)
    if not low <= value <= high:
        raise ValueError(f"{name}: {value} is out of range {low}-{high}")
    return value


def _instant(d: date, hour: int, minute: int, tz: tzinfo) -> datetime:
    """Return when local wall time `d hour:minute` happens (see the module docstring)."""
    wall = datetime.combine(d, time(hour, minute))
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first  # exists; fold=0 is the first of two occurrences
    # Skipped by a forward jump: fold=1 lies before the jump, fold=0 after it.
    lo = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    hi = first
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(tz).utcoffset() == hi.astimezone(tz).utcoffset():
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)
