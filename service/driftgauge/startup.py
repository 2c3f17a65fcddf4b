"""Build everything `serve` builds before it touches a network; `config validate` runs it too.

So a config that validates starts: schedules with their triggers and first fire times,
canary and signals triggers, API tokens and every secret reference.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_file
from driftgauge.core.errors import ConfigError


def load_service_config(path: str | Path, *, resolve_secrets: bool = True) -> Config:
    """Load the config and build serve's network-free parts; raise ConfigError listing all."""
    config = load_file(path, resolve_secrets=resolve_secrets)
    problems = runtime_problems(config, resolve_secrets=resolve_secrets)
    if problems:
        raise ConfigError(problems)
    return config


def runtime_problems(
    config: Config, *, resolve_secrets: bool = True, now: datetime | None = None
) -> list[str]:
    """Return what fails when serve builds its schedules and token check from `config`."""
    from driftgauge.api.auth import TokenCheck
    from driftgauge.app.service import create_app
    from driftgauge.core.clock import utc_now
    from driftgauge.jobs.recurring import canary_grid, signals_grid
    from driftgauge.jobs.schedule import job_specs

    at = now or utc_now()
    problems: list[str] = []
    for spec in job_specs(config.checks):
        where = f"checks.{spec.check}.schedule.{spec.kind}"
        try:
            spec.trigger().get_next_fire_time(None, at)
            spec.latest_fire(at)
            spec.period(at)
        except (ValueError, ArithmeticError) as exc:
            problems.append(f"{where}: cannot be scheduled ({exc})")
    for name, check in sorted(config.checks.items()):
        try:
            if check.canary is not None:
                canary_grid(check).trigger().get_next_fire_time(None, at)
        except (ValueError, ArithmeticError) as exc:
            problems.append(f"checks.{name}.canary: cannot be scheduled ({exc})")
        try:
            if check.schedule.recent_every is not None:  # the signals measure on this interval
                signals_grid(check).trigger().get_next_fire_time(None, at)
        except (ValueError, ArithmeticError) as exc:
            problems.append(f"checks.{name}.schedule.recent: cannot be scheduled ({exc})")
    if resolve_secrets:
        try:
            TokenCheck.from_config(config.api)
            create_app(config)  # routes, token checks, OpenAPI: nothing opens yet
        except ConfigError as exc:
            problems.extend(p for p in exc.problems if p not in problems)
    return problems
