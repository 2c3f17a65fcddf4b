"""Value types of the config models: each rejects what would misbehave later, saying why."""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from driftgauge import cron

_PART = re.compile(r"(\d+(?:\.\d+)?)(w|d|h|m|s)")
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_ORDER = list(_UNITS)
_HINT = "use e.g. 30s, 15m, 2h, 1h30m, 1d"


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors, numbers finite, types exact."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def parse_duration(text: str) -> timedelta:
    """Return the timedelta for a duration such as `90s`, `15m`, `2h`, `1h30m`, `1d`.

    Units go from largest to smallest, each at most once (as in Prometheus); the total
    must be a whole number of seconds.
    """
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a duration ({_HINT})")
    body = text.strip()
    parts = _PART.findall(body)
    if not body or "".join(n + u for n, u in parts) != body:
        raise ValueError(f"{text!r} is not a duration ({_HINT})")
    units = [_ORDER.index(u) for _, u in parts]
    if units != sorted(set(units)):
        raise ValueError(f"{text!r}: give each unit once, largest first (e.g. 1h30m)")
    seconds = sum(Fraction(n) * _UNITS[u] for n, u in parts)
    if seconds.denominator != 1:
        raise ValueError(f"{text!r} is not a whole number of seconds")
    if seconds > 100 * 366 * 86400:
        raise ValueError(f"{text!r} is longer than 100 years")
    return timedelta(seconds=int(seconds))


def show(delta: timedelta) -> str:
    """Return a duration the way the config writes it, e.g. `1h30m`."""
    left = int(delta.total_seconds())
    if left == 0:
        return "0s"
    out = ""
    for unit in ("d", "h", "m", "s"):
        n, left = divmod(left, _UNITS[unit])
        if n:
            out += f"{n}{unit}"
    return out


def between(minimum: str, maximum: str) -> Any:
    """Return a validator turning a duration string into a timedelta in [minimum, maximum]."""
    low, high = parse_duration(minimum), parse_duration(maximum)

    def check(value: Any) -> timedelta:
        if isinstance(value, timedelta):  # a default
            return value
        got = parse_duration(value)
        if got < low:
            raise ValueError(f"must be at least {minimum}, got {value}")
        if got > high:
            raise ValueError(f"must be at most {maximum}, got {value}")
        return got

    return BeforeValidator(check)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _non_empty_mapping(value: dict[str, Any]) -> dict[str, Any]:
    if not value:
        raise ValueError("must not be empty (leave the key out instead)")
    return value


def _non_empty_list(value: list[Any]) -> list[Any]:
    if not value:
        raise ValueError("must list at least one value")
    return value


def _url(value: str) -> str:
    shown = "" if "@" in value else f", got {value!r}"
    if value.startswith(("env:", "file:")):
        raise ValueError(
            "must be a URL, not a secret reference (only dsn, password and "
            "tokens are resolved); put credentials in username and password"
        )
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise ValueError(f"must be an http:// or https:// URL{shown}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host{shown}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "must not carry credentials (they would be printed); use username and password"
        )
    if port == 0 or parts.query or parts.fragment:
        raise ValueError(f"must be a base URL with a host and an optional port and path{shown}")
    return value


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _secret_ref(value: str) -> str:
    """Check a secret's shape (never echoing it): inline, env:NAME or file:/path."""
    _not_blank(value)
    if value.startswith("env:") and not _ENV_NAME.fullmatch(value[4:]):
        raise ValueError("env: needs an environment variable name, e.g. env:TASKS_DSN")
    if value.startswith("file:") and (not value[5:].strip() or "\x00" in value):
        raise ValueError("file: needs a path, e.g. file:/run/secrets/tasks_dsn")
    return value


def _cron(value: str) -> str:
    cron.parse(value)
    return value


NonEmpty = Annotated[str, AfterValidator(_not_blank)]
"""A string with something in it (names, columns, queries, references)."""
NonEmptyMapping = Annotated[dict[str, Any], AfterValidator(_non_empty_mapping)]
Url = Annotated[str, AfterValidator(_url)]
SecretRef = Annotated[str, AfterValidator(_secret_ref)]
"""A secret: an inline value, `env:NAME` or `file:/path` (resolved at start-up)."""
Cron = Annotated[str, AfterValidator(_cron)]
Ratio = Annotated[float, Field(ge=0, le=1)]
NonEmptyList = AfterValidator(_non_empty_list)
Seconds = Annotated[float, Field(gt=0, le=3600)]
"""A store or canary deadline in seconds (finite: the models refuse inf and nan)."""

# Durations, each with the range where it makes sense (see docs/reliability.md, "Config").
CheckInterval = Annotated[timedelta, between("1s", "366d")]
"""How often a check's recent or full pass runs (seconds are for tests; 15m+ in production)."""
CanaryInterval = Annotated[timedelta, between("1m", "366d")]
"""How often a canary writes a sentinel into the production index."""
Settle = Annotated[timedelta, between("0s", "90d")]
SummaryDeadline = Annotated[timedelta, between("0s", "30d")]
LedgerSettle = Annotated[timedelta, between("0s", "7d")]
Keep = Annotated[timedelta, between("1h", "36600d")]
"""How long the state database keeps a kind of row."""
