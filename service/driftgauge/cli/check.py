"""`driftgauge check`: reconcile one check now, as the service would, and print its days."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from driftgauge.cli.common import (
    EXIT_DRIFT,
    EXIT_ERROR,
    EXIT_NOTHING_JUDGED,
    EXIT_OK,
    check_named,
    log_options,
    with_config,
)
from driftgauge.cli.render import ProgressBar, render_run
from driftgauge.config.frozen import Check, Config
from driftgauge.core.errors import ConfigError

if TYPE_CHECKING:
    from driftgauge.engine.result import RunResult
    from driftgauge.jobs.adapters import Adapters
    from driftgauge.stores.base import StoreAdapter


def add_commands(sub: Any) -> None:
    """Add `check` to the CLI's subparsers."""
    chk = sub.add_parser("check", help="reconcile one check now and print its day buckets")
    chk.add_argument("name", help="the check's name under checks: in the config")
    with_config(chk)
    chk.add_argument("--since", type=date.fromisoformat, help="first day (YYYY-MM-DD)")
    chk.add_argument("--until", type=date.fromisoformat, help="last day, inclusive")
    chk.add_argument("--full", action="store_true", help="the full-history window")
    chk.add_argument(
        "--json",
        action="store_true",
        help="print the result as JSON: what the table says (run id, totals, "
        "sample keys with kind and copies, reasons, status) and more",
    )
    chk.add_argument(
        "--no-store", action="store_true", help="do not record the run in the state database"
    )
    chk.add_argument(
        "--first-pass",
        choices=("auto", "days", "slots"),
        default="auto",
        help="days: day aggregates only; slots: also each day's slots, so a "
        "differing day is not hashed twice; auto (default): the planner decides from "
        "the stored verdicts (docs/algorithm.md); where both sides build difference "
        "digests and nothing is known (a first run, or --no-store), day aggregates "
        "first and digests of only the days that differ; else slots",
    )
    log_options(chk, "WARNING", "text")


def run(config: Config, args: argparse.Namespace) -> int:
    """Reconcile the check, print its day table (or JSON) and exit by its status."""
    check = check_named(config, args.name)
    return asyncio.run(_run_check(config, check, args))


def window(check: Check, args: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
    """Return the window --since/--until/--full name, else the recent schedule's."""
    if not (args.since or args.until):
        # The same windows the service's schedules use.
        from driftgauge.jobs.windows import window_for

        return window_for(check, "full" if args.full else "recent", now)
    tz = check.timezone
    until = args.until or now.astimezone(tz).date()
    since = args.since or until - timedelta(days=check.schedule.recent_days - 1)
    if since > until:
        raise ConfigError([f"--since {since} is after --until {until}"])
    start = datetime(since.year, since.month, since.day, tzinfo=tz)
    end_day = until + timedelta(days=1)
    end = min(datetime(end_day.year, end_day.month, end_day.day, tzinfo=tz), now)
    return start, max(end, start + timedelta(microseconds=1))


async def _run_check(config: Config, check: Check, args: argparse.Namespace) -> int:
    from driftgauge.cli.sides import opened_sides
    from driftgauge.engine.reconcile import reconcile
    from driftgauge.engine.strategy import FirstPass
    from driftgauge.stores.preflight import preflight

    now = datetime.now(UTC)
    start, end = window(check, args, now)
    bar = ProgressBar(sys.stderr, label=check.name)
    async with opened_sides(check) as sides:
        source, reader = sides
        try:
            slots_first = {"days": False, "slots": True}.get(args.first_pass)

            async def checked() -> Adapters:
                await preflight(check, source, reader)
                return sides

            if args.no_store:
                await checked()
                cheap = _cheap_start(args.first_pass, source, reader)
                # No history is read without the state database: nothing known, so slots.
                result = await reconcile(
                    check,
                    source,
                    reader,
                    start,
                    end,
                    now=now,
                    sample_keys=config.api.sample_keys,
                    progress=bar.update,
                    first=FirstPass(slots=slots_first is not False and not cheap, rescan=cheap),
                )
                result.finished_at = datetime.now(UTC)
            else:
                # The preflight inside the run, so a refused field is a recorded failed run.
                result = await _stored_run(
                    config, check, checked, start, end, now, bar, slots_first
                )
        finally:
            bar.close()
    if args.json:
        from driftgauge.cli.report import run_report

        print(json.dumps(run_report(result, composite=check.source.composite), indent=2))
    else:
        print(render_run(result))
        if result.run_id is not None:
            print(f"run {result.run_id} recorded in the state database")
    if result.error is not None:
        print(f"error: {result.error}", file=sys.stderr)
        return EXIT_ERROR
    return {"ok": EXIT_OK, "drift": EXIT_DRIFT, "nothing_judged": EXIT_NOTHING_JUDGED}.get(
        result.status, EXIT_ERROR
    )


def _cheap_start(first_pass: str, source: StoreAdapter, reader: StoreAdapter) -> bool:
    """Return True when an auto first pass with nothing known starts with day aggregates.

    Where both sides build difference digests, the days that then differ are scanned for
    them (engine.second_pass); elsewhere slots in the first scan keep a differing day
    from being hashed twice.
    """
    from driftgauge.stores.base import DigestFirstPass

    capable = isinstance(source, DigestFirstPass) and isinstance(reader, DigestFirstPass)
    return first_pass == "auto" and capable


async def _stored_run(
    config: Config,
    check: Check,
    sides: Callable[[], Awaitable[Adapters]],
    start: datetime,
    end: datetime,
    now: datetime,
    bar: ProgressBar,
    slots_first: bool | None,
) -> RunResult:
    """Run the check as the service would, recording it (and its ledger exclusions)."""
    from driftgauge.jobs.runner import run_check
    from driftgauge.ledger.service import exclusion_source
    from driftgauge.ledger.store import LedgerStore
    from driftgauge.pg.pools import open_pool
    from driftgauge.state.store import StateStore

    state = await StateStore.open(config.state)
    pool = await open_pool(config.state, deadline=10.0) if check.ledger is not None else None
    try:
        excused = exclusion_source(LedgerStore(pool, 10.0) if pool is not None else None)
        return await run_check(
            check,
            sides,
            state,
            start,
            end,
            trigger="cli",
            now=now,
            sample_keys=config.api.sample_keys,
            exclusions=excused,
            progress=bar.update,
            slots_first=slots_first,
        )
    finally:
        if pool is not None:
            await pool.close()
        await state.close()
