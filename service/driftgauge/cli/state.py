"""`driftgauge state prune`: delete stored results past state.retention."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from typing import Any

from driftgauge.cli.common import EXIT_ERROR, EXIT_OK, log_options, with_config
from driftgauge.config.frozen import Config


def add_commands(sub: Any) -> None:
    """Add `state prune` to the CLI's subparsers."""
    st = sub.add_parser("state", help="work with the state database")
    st_sub = st.add_subparsers(dest="state_command", required=True, help="what to do")
    prn = st_sub.add_parser(
        "prune",
        help="delete stored results past state.retention and print the rows deleted per table",
    )
    with_config(prn)
    prn.add_argument("--dry-run", action="store_true", help="only count what would be deleted")
    log_options(prn, "WARNING", "text")


def run(config: Config, args: argparse.Namespace) -> int:
    """Prune the state database and print the rows deleted per table."""
    return asyncio.run(_prune(config, dry_run=args.dry_run))


async def _prune(config: Config, *, dry_run: bool) -> int:
    from driftgauge.retention.prune import TABLES, prune
    from driftgauge.state.store import StateStore

    state = await StateStore.open(config.state)
    try:
        report = await prune(state, config, datetime.now(UTC), dry_run=dry_run)
    finally:
        await state.close()
    if report.skipped:
        print(
            f"error: state.schema: another process is pruning schema {config.state.schema!r};"
            " try again later",
            file=sys.stderr,
        )
        return EXIT_ERROR
    print(
        f"{'would delete (dry run)' if dry_run else 'deleted'} from schema "
        f"{config.state.schema!r}: runs finished before {report.runs_before:%Y-%m-%d %H:%M}"
        f" UTC, ledger rows before {report.ledger_before:%Y-%m-%d %H:%M} UTC"
    )
    width = max(len(t) for t in TABLES)
    for table in TABLES:
        print(f"  {table:<{width}}  {report.deleted.get(table, 0):>9}")
    print(f"  {'total':<{width}}  {report.total:>9}")
    return EXIT_OK
