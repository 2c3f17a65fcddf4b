"""`driftgauge drill`: ask both stores live about one day, hour or key-hash prefix."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import date
from typing import Any

from driftgauge.cli.common import (
    EXIT_DRIFT,
    EXIT_ERROR,
    EXIT_OK,
    check_named,
    log_options,
    with_config,
)
from driftgauge.cli.render import render_drill
from driftgauge.config.frozen import Check, Config
from driftgauge.engine.payloads import DrillOut


def add_commands(sub: Any) -> None:
    """Add `drill` to the CLI's subparsers."""
    drl = sub.add_parser("drill", help="drill into one day: hours, key prefixes, keys")
    drl.add_argument("name", help="the check's name under checks: in the config")
    drl.add_argument(
        "day", type=date.fromisoformat, help="the day bucket (YYYY-MM-DD, in the check's time zone)"
    )
    with_config(drl)
    drl.add_argument(
        "--hour",
        metavar="H",
        help="one hour bucket: a local hour (2), or, where the clocks repeat "
        "it, the local time with its offset (02:00+01:00) or the UTC start "
        "(2026-10-25T01:00:00Z)",
    )
    drl.add_argument("--prefix", default=None, help="key-hash prefix (hex)")
    drl.add_argument("--json", action="store_true", help="print the level as JSON")
    log_options(drl, "WARNING", "text")


def run(config: Config, args: argparse.Namespace) -> int:
    """Print one level of the drill-down; exit 1 when the sides differ there."""
    report = asyncio.run(_drill(check_named(config, args.name), args))
    if args.json:
        print(json.dumps(report.model_dump(), indent=2))
    else:
        print(render_drill(report))
    if report.unexplained:
        print(f"error: {report.unexplained}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_DRIFT if report.differs else EXIT_OK


async def _drill(check: Check, args: argparse.Namespace) -> DrillOut:
    """Ask both sides of the check about the level the arguments name."""
    from driftgauge.cli.sides import opened_sides
    from driftgauge.engine.live import drill_live
    from driftgauge.stores.preflight import preflight

    async with opened_sides(check) as (source, reader):
        await preflight(check, source, reader)
        return await drill_live(check, source, reader, args.day, args.hour, args.prefix)
