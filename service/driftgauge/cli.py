"""The `driftgauge` command: validate config, run a check, drill down, prune state, serve.

Exit codes: 0 ok; 1 drift (`check` or `drill` found differences, or `probe rerun` found a
step that is not idempotent; nothing else exits 1);
2 error (an invalid config, a bad argument, a store or the state database failing, a run
that errored); 3 an internal error (a bug: please report the traceback); 4 nothing judged
(`check` ran but every day bucket was settling, or the window held no day: not a pass).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from driftgauge import __version__
from driftgauge.config.loader import load_file
from driftgauge.config.runtime import Check, Config
from driftgauge.core.errors import ConfigError, DriftgaugeError
from driftgauge.render import ProgressBar, render_drill, render_run
from driftgauge.repair import cli as repair_cli
from driftgauge.repair.cli import add_commands as add_repair_commands

EXIT_OK, EXIT_DRIFT, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_NOTHING_JUDGED = 4
"""`check` judged no bucket (all settling, or the window holds no day yet): not a pass."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="driftgauge", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"driftgauge {__version__}")
    sub = p.add_subparsers(dest="command", required=True, help="what to do")

    cfg = sub.add_parser("config", help="work with a config file")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, help="what to do")
    val = cfg_sub.add_parser("validate", help="print every problem in a config and exit 2 if "
                             "any; checks everything serve builds before it connects")
    val.add_argument("file", help="the config file to check")
    val.add_argument("--no-secrets", action="store_true",
                     help="do not try to resolve env:/file: secret references")
    val.add_argument("--connect", action="store_true",
                     help="also ask the stores whether every configured field is readable")

    def with_config(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--config", default=os.environ.get("DRIFTGAUGE_CONFIG"),
                        help="config file (default: $DRIFTGAUGE_CONFIG)")

    chk = sub.add_parser("check", help="reconcile one check now and print its day buckets")
    chk.add_argument("name", help="the check's name under checks: in the config")
    with_config(chk)
    chk.add_argument("--since", type=date.fromisoformat, help="first day (YYYY-MM-DD)")
    chk.add_argument("--until", type=date.fromisoformat, help="last day, inclusive")
    chk.add_argument("--full", action="store_true", help="the full-history window")
    chk.add_argument("--json", action="store_true",
                     help="print the result as JSON: what the table says (run id, totals, "
                     "sample keys with kind and copies, reasons, status) and more")
    chk.add_argument("--no-store", action="store_true",
                     help="do not record the run in the state database")
    chk.add_argument("--first-pass", choices=("auto", "days", "slots"), default="auto",
                     help="days: day aggregates only; slots: also each day's slots, so a "
                     "differing day is not hashed twice; auto (default): slots "
                     "when the last stored verdict of a day in the window is drift or no day "
                     "of it was judged yet (with --no-store nothing is known: slots)")
    _log_options(chk, "WARNING", "text")

    drl = sub.add_parser("drill", help="drill into one day: hours, key prefixes, keys")
    drl.add_argument("name", help="the check's name under checks: in the config")
    drl.add_argument("day", type=date.fromisoformat,
                     help="the day bucket (YYYY-MM-DD, in the check's time zone)")
    with_config(drl)
    drl.add_argument("--hour", metavar="H",
                     help="one hour bucket: a local hour (2), or, where the clocks repeat "
                     "it, the local time with its offset (02:00+01:00) or the UTC start "
                     "(2026-10-25T01:00:00Z)")
    drl.add_argument("--prefix", default=None, help="key-hash prefix (hex)")
    drl.add_argument("--json", action="store_true", help="print the level as JSON")
    _log_options(drl, "WARNING", "text")

    st = sub.add_parser("state", help="work with the state database")
    st_sub = st.add_subparsers(dest="state_command", required=True, help="what to do")
    prn = st_sub.add_parser("prune", help="delete stored results past state.retention and print "
                            "the rows deleted per table")
    with_config(prn)
    prn.add_argument("--dry-run", action="store_true",
                     help="only count what would be deleted")
    _log_options(prn, "WARNING", "text")

    add_repair_commands(sub, with_config, _log_options)
    srv = sub.add_parser("serve", help="run every check on its schedule; /metrics and REST API")
    with_config(srv)
    srv.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    srv.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    _log_options(srv)
    return p


def _log_options(sp: argparse.ArgumentParser, level: str = "INFO", fmt: str = "json") -> None:
    from driftgauge.logs import FORMATS, LEVELS

    sp.add_argument("--log-level", type=str.upper, choices=LEVELS,
                    default=os.environ.get("DRIFTGAUGE_LOG_LEVEL", level).upper(),
                    help=f"least severe level logged to stderr (default: $DRIFTGAUGE_LOG_LEVEL "
                    f"or {level})" + ("; DEBUG adds the /healthz, /readyz and /metrics "
                                      "request lines" if sp.prog.endswith("serve") else ""))
    sp.add_argument("--log-format", choices=FORMATS,
                    default=os.environ.get("DRIFTGAUGE_LOG_FORMAT", fmt).lower(),
                    help=f"json: one JSON object a line; text: one readable line per record "
                    f"(default: $DRIFTGAUGE_LOG_FORMAT or {fmt})")


def _configure_logs(args: argparse.Namespace) -> None:
    from driftgauge import logs

    # A default from the environment is not checked by argparse's choices.
    if args.log_level not in logs.LEVELS or args.log_format not in logs.FORMATS:
        raise ConfigError([f"--log-level {args.log_level!r} / --log-format "
                           f"{args.log_format!r} (or $DRIFTGAUGE_LOG_LEVEL / "
                           f"$DRIFTGAUGE_LOG_FORMAT): the level is one of "
                           f"{', '.join(logs.LEVELS)}, the format one of "
                           f"{', '.join(logs.FORMATS)}"])
    if args.command != "serve":  # serve configures its own, uvicorn's loggers included
        logs.configure(args.log_level, args.log_format)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "config":
            return _validate(args.file, resolve_secrets=not args.no_secrets,
                             connect=args.connect)
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
    except Exception:
        # Exit 1 means drift: an unexpected failure must never look like a verdict.
        traceback.print_exc()
        print("error: internal error (a bug; the traceback above says where)", file=sys.stderr)
        return EXIT_INTERNAL


def _run(args: argparse.Namespace) -> int:
    """Run a command that needs --config."""
    _configure_logs(args)
    if args.command == "serve":
        from driftgauge.server import serve

        serve(args.config, args.host, args.port, log_level=args.log_level,
              log_format=args.log_format)
        return EXIT_OK
    config = load_file(args.config)
    if hasattr(args, "repair"):
        return repair_cli.run(config, args)
    if args.command == "state":
        return asyncio.run(_prune(config, dry_run=args.dry_run))
    check = _check(config, args.name)
    if args.command == "check":
        return asyncio.run(_run_check(config, check, args))
    return asyncio.run(_drill(config, check, args))


def _validate(path: str, *, resolve_secrets: bool, connect: bool = False) -> int:
    from driftgauge.startup import load_service_config
    from driftgauge.stores.preflight import verify_all

    try:
        config = load_service_config(path, resolve_secrets=resolve_secrets)
        if connect:
            # The schema preflight each run does first, for every check at once.
            problems = asyncio.run(verify_all(config))
            if problems:
                raise ConfigError(problems)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem)
        print(f"{path}: {len(exc.problems)} problem(s)", file=sys.stderr)
        return EXIT_ERROR
    print(f"{path}: ok ({len(config.checks)} checks, {len(config.stores)} stores)")
    return 0


def _check(config: Config, name: str) -> Check:
    if name not in config.checks:
        known = ", ".join(sorted(config.checks)) or "none"
        raise ConfigError([f"checks.{name}: no such check (configured: {known})"])
    return config.checks[name]


def _window(check: Check, args: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
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
    from driftgauge.engine.reconcile import reconcile
    from driftgauge.jobs.adapters import Adapters
    from driftgauge.stores import open_adapter
    from driftgauge.stores.preflight import preflight

    now = datetime.now(UTC)
    start, end = _window(check, args, now)
    bar = ProgressBar(sys.stderr, label=check.name)
    source = await open_adapter(check.source)
    try:
        reader = await open_adapter(check.reader)
        try:
            slots_first = {"days": False, "slots": True}.get(args.first_pass)
            async def checked() -> Adapters:
                await preflight(check, source, reader)
                return Adapters(source, reader)

            if args.no_store:
                await checked()
                # No history is read without the state database: nothing known, so slots.
                result = await reconcile(check, source, reader, start, end, now=now,
                                         sample_keys=config.api.sample_keys,
                                         progress=bar.update, slots_first=slots_first is not False)
                result.finished_at = datetime.now(UTC)
            else:
                # The preflight inside the run, so a refused field is a recorded failed run.
                result = await _stored_run(config, check, checked, start, end, now, bar,
                                           slots_first)
        finally:
            bar.close()
            await reader.close()
    finally:
        await source.close()
    if args.json:
        from driftgauge.run_report import run_report

        print(json.dumps(run_report(result), indent=2))
    else:
        print(render_run(result))
        if result.run_id is not None:
            print(f"run {result.run_id} recorded in the state database")
    if result.error is not None:
        print(f"error: {result.error}", file=sys.stderr)
        return EXIT_ERROR
    return {"ok": EXIT_OK, "drift": EXIT_DRIFT,
            "nothing_judged": EXIT_NOTHING_JUDGED}.get(result.status, EXIT_ERROR)


async def _stored_run(config: Config, check: Check, sides: Any, start: datetime,
                      end: datetime, now: datetime, bar: ProgressBar,
                      slots_first: bool | None) -> Any:
    """Run the check as the service would, recording it (and its ledger exclusions)."""
    from driftgauge.jobs.runner import run_check
    from driftgauge.ledger.service import ledger_exclusions
    from driftgauge.ledger.store import LedgerStore
    from driftgauge.state.store import StateStore
    from driftgauge.stores.postgres.io import open_pool

    state = await StateStore.open(config.state)
    pool = await open_pool(config.state, deadline=10.0) if check.ledger is not None else None
    try:
        async def excused(c: Check, s: datetime, e: datetime) -> dict[str, str]:
            if pool is None:
                return {}
            return await ledger_exclusions(LedgerStore(pool, 10.0), c, s, e)

        return await run_check(check, sides, state, start, end, trigger="cli", now=now,
                               sample_keys=config.api.sample_keys, exclusions=excused,
                               progress=bar.update, slots_first=slots_first)
    finally:
        if pool is not None:
            await pool.close()
        await state.close()


async def _drill(config: Config, check: Check, args: argparse.Namespace) -> int:
    from driftgauge.engine.drill import drill_live
    from driftgauge.stores import open_adapter
    from driftgauge.stores.preflight import preflight

    source = await open_adapter(check.source)
    try:
        reader = await open_adapter(check.reader)
        try:
            await preflight(check, source, reader)
            report = await drill_live(check, source, reader, args.day, args.hour, args.prefix)
        finally:
            await reader.close()
    finally:
        await source.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render_drill(report))
    if report.get("unexplained"):
        print(f"error: {report['unexplained']}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_DRIFT if report["differs"] else EXIT_OK


async def _prune(config: Config, *, dry_run: bool) -> int:
    from driftgauge.retention.prune import TABLES, prune
    from driftgauge.state.store import StateStore

    state = await StateStore.open(config.state)
    try:
        report = await prune(state, config, datetime.now(UTC), dry_run=dry_run)
    finally:
        await state.close()
    if report.skipped:
        print(f"error: state.schema: another process is pruning schema {config.state.schema!r};"
              " try again later", file=sys.stderr)
        return EXIT_ERROR
    print(f"{'would delete (dry run)' if dry_run else 'deleted'} from schema "
          f"{config.state.schema!r}: runs finished before {report.runs_before:%Y-%m-%d %H:%M}"
          f" UTC, ledger rows before {report.ledger_before:%Y-%m-%d %H:%M} UTC")
    width = max(len(t) for t in TABLES)
    for table in TABLES:
        print(f"  {table:<{width}}  {report.deleted.get(table, 0):>9}")
    print(f"  {'total':<{width}}  {report.total:>9}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
