"""`driftgauge config validate`: every problem of a config, as serve would find it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from driftgauge.cli.common import EXIT_ERROR, EXIT_OK
from driftgauge.core.errors import ConfigError


def add_commands(sub: Any) -> None:
    """Add `config validate` to the CLI's subparsers."""
    cfg = sub.add_parser("config", help="work with a config file")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, help="what to do")
    val = cfg_sub.add_parser(
        "validate",
        help="print every problem in a config and exit 2 if "
        "any; checks everything serve builds before it connects",
    )
    val.add_argument("file", help="the config file to check")
    val.add_argument(
        "--no-secrets",
        action="store_true",
        help="do not try to resolve env:/file: secret references",
    )
    val.add_argument(
        "--connect",
        action="store_true",
        help="also ask the stores whether every configured field is readable",
    )


def run(args: argparse.Namespace) -> int:
    """Print the config's problems (exit 2) or a one-line summary (exit 0)."""
    from driftgauge.startup import load_service_config
    from driftgauge.stores.preflight import verify_all

    path = args.file
    try:
        config = load_service_config(path, resolve_secrets=not args.no_secrets)
        if args.connect:
            # The schema preflight each run does first, for every check at once.
            problems = asyncio.run(verify_all(config))
            if problems:
                raise ConfigError(problems)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem)
        print(f"{path}: {len(exc.problems)} problem(s)", file=sys.stderr)
        return EXIT_ERROR
    from driftgauge.core.clock import utc_now
    from driftgauge.jobs.schedule import collisions

    for warning in collisions(config.checks, utc_now()):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{path}: ok ({len(config.checks)} checks, {len(config.stores)} stores)")
    return EXIT_OK
