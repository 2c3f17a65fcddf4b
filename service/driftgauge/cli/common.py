"""What every command group shares: exit codes, the --config and log options, a check by name."""

from __future__ import annotations

import argparse
import os

from driftgauge.config.frozen import Check, Config
from driftgauge.core.errors import ConfigError

EXIT_OK, EXIT_DRIFT, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_NOTHING_JUDGED = 4
"""`check` judged no bucket (all settling, or the window holds no day yet): not a pass."""
EXIT_READER_LEFT = 141
"""stdout's reader closed it before the output was written (128 + SIGPIPE, as a shell says)."""


def with_config(sp: argparse.ArgumentParser) -> None:
    """Add --config, defaulting to $DRIFTGAUGE_CONFIG."""
    sp.add_argument(
        "--config",
        default=os.environ.get("DRIFTGAUGE_CONFIG"),
        help="config file (default: $DRIFTGAUGE_CONFIG)",
    )


def log_options(sp: argparse.ArgumentParser, level: str = "INFO", fmt: str = "json") -> None:
    """Add --log-level and --log-format, defaulting to the environment, then `level`/`fmt`."""
    from driftgauge.logs import FORMATS, LEVELS

    sp.add_argument(
        "--log-level",
        type=str.upper,
        choices=LEVELS,
        default=os.environ.get("DRIFTGAUGE_LOG_LEVEL", level).upper(),
        help=f"least severe level logged to stderr (default: $DRIFTGAUGE_LOG_LEVEL "
        f"or {level})"
        + (
            "; DEBUG adds the /healthz, /readyz and /metrics request lines"
            if sp.prog.endswith("serve")
            else ""
        ),
    )
    sp.add_argument(
        "--log-format",
        choices=FORMATS,
        default=os.environ.get("DRIFTGAUGE_LOG_FORMAT", fmt).lower(),
        help=f"json: one JSON object a line; text: one readable line per record "
        f"(default: $DRIFTGAUGE_LOG_FORMAT or {fmt})",
    )


def configure_logs(args: argparse.Namespace) -> None:
    """Check the log options (an environment default skips argparse) and apply them."""
    from driftgauge import logs

    # A default from the environment is not checked by argparse's choices.
    if args.log_level not in logs.LEVELS or args.log_format not in logs.FORMATS:
        raise ConfigError(
            [
                f"--log-level {args.log_level!r} / --log-format "
                f"{args.log_format!r} (or $DRIFTGAUGE_LOG_LEVEL / "
                f"$DRIFTGAUGE_LOG_FORMAT): the level is one of "
                f"{', '.join(logs.LEVELS)}, the format one of "
                f"{', '.join(logs.FORMATS)}"
            ]
        )
    if args.command != "serve":  # serve configures its own, uvicorn's loggers included
        logs.configure(args.log_level, args.log_format)


def check_named(config: Config, name: str) -> Check:
    """Return the configured check `name`, or a ConfigError listing the configured ones."""
    if name not in config.checks:
        known = ", ".join(sorted(config.checks)) or "none"
        raise ConfigError([f"checks.{name}: no such check (configured: {known})"])
    return config.checks[name]
