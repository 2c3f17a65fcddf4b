"""The `driftgauge` command: validate config, run or calibrate a check, drill, prune, serve.

Exit codes: 0 ok; 1 drift (`check` or `drill` found differences, or `probe rerun` found a
step that is not idempotent; nothing else exits 1);
2 error (an invalid config, a bad argument, a store or the state database failing, a run
that errored); 3 an internal error (a bug: please report the traceback); 4 nothing judged
(`check` ran but every day bucket was settling, or the window held no day: not a pass);
141 stdout's reader closed it first (`| head`).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from driftgauge import __version__
from driftgauge.cli import calibrate, check, drill, serve, state, validate
from driftgauge.cli import repair as repair_cli
from driftgauge.cli.common import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_READER_LEFT,
    configure_logs,
    log_options,
    with_config,
)
from driftgauge.configfile.loader import load_file
from driftgauge.core.errors import ConfigError, DriftgaugeError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="driftgauge", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"driftgauge {__version__}")
    sub = p.add_subparsers(dest="command", required=True, help="what to do")
    validate.add_commands(sub)
    check.add_commands(sub)
    calibrate.add_commands(sub)
    drill.add_commands(sub)
    state.add_commands(sub)
    repair_cli.add_commands(sub, with_config, log_options)
    serve.add_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "config":
            return validate.run(args)
        if args.config is None:
            print("error: --config is required (or set DRIFTGAUGE_CONFIG)", file=sys.stderr)
            return EXIT_ERROR
        return _run(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    except DriftgaugeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_left()
    except Exception:
        # Exit 1 means drift: an unexpected failure must never look like a verdict.
        traceback.print_exc()
        print("error: internal error (a bug; the traceback above says where)", file=sys.stderr)
        return EXIT_INTERNAL


def _reader_left() -> int:
    """Return 141 (a shell's SIGPIPE status) when stdout's reader left, as `| head` does.

    The reader chose to stop reading: not a bug, and not a verdict. stdout is pointed
    at /dev/null so the interpreter's final flush cannot raise again on the way out.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_READER_LEFT


def _run(args: argparse.Namespace) -> int:
    """Run a command that needs --config."""
    configure_logs(args)
    if args.command == "serve":
        return serve.run(args)
    config = load_file(args.config)
    if hasattr(args, "repair"):
        return repair_cli.run(config, args)
    if args.command == "state":
        return state.run(config, args)
    if args.command == "check":
        return check.run(config, args)
    if args.command == "calibrate":
        return calibrate.run(config, args)
    return drill.run(config, args)
