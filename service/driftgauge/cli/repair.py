"""`driftgauge backfill ...`, `driftgauge probe rerun` and `driftgauge watermark ...`.

Each command works on the state database and the check's stores named by --config, with
the same rules as the REST API; a refused step prints its rule and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from driftgauge.config.frozen import Config
from driftgauge.repair.errors import Refused, RepairError, RepairInputError

if TYPE_CHECKING:
    from driftgauge.repair.models import BackfillShown, RerunProbed, WatermarkShown
    from driftgauge.repair.service import Repair
    from driftgauge.stores.base import StoreAdapter

EXIT_OK, EXIT_FINDING, EXIT_ERROR = 0, 1, 2
STEPS = ("plan", "announce", "start", "verify", "replay", "close", "show")
Body = TypeVar("Body", bound=BaseModel)
Answer = TypeVar("Answer")


def _instant(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a time zone (e.g. ...T05:00:00Z)")
    return value


Finish = Callable[[argparse.ArgumentParser, str, Callable[..., Any]], None]
"""Add --json, --config and the log options to a command, and set what it runs."""


def add_commands(
    sub: Any,
    with_config: Callable[[argparse.ArgumentParser], None],
    log_options: Callable[..., None],
) -> None:
    """Add the backfill, probe and watermark commands to the CLI's subparsers."""

    def finish(sp: argparse.ArgumentParser, what: str, command: Callable[..., Any]) -> None:
        sp.add_argument("--json", action="store_true", help=f"print {what} as JSON")
        with_config(sp)
        log_options(sp, "WARNING", "text")
        sp.set_defaults(repair=command)

    _add_backfill(sub, finish)
    _add_probe(sub, finish)
    _add_watermark(sub, finish)


def _add_backfill(sub: Any, finish: Finish) -> None:
    """Add `driftgauge backfill <step>`, one subcommand per lifecycle step."""
    bf = sub.add_parser(
        "backfill",
        help="plan, announce, start, verify, replay, close, show "
        "a backfill (in that order; the rules refuse any other)",
    )
    bf_sub = bf.add_subparsers(dest="backfill_command", required=True, help="the step")
    for step in STEPS:
        sp = bf_sub.add_parser(
            step,
            help=f"the {step} step"
            if step != "show"
            else "print a backfill: targets, consumers, replays, events",
        )
        if step == "plan":
            sp.add_argument("check", help="the check whose drifting hours to repair")
            sp.add_argument("--reason", required=True, help="why (goes in the announcement)")
            sp.add_argument("--since", type=date.fromisoformat, help="first day (YYYY-MM-DD)")
            sp.add_argument("--until", type=date.fromisoformat, help="last day, inclusive")
            sp.add_argument("--pipeline", help="the pipeline whose watermark start moves back")
        else:
            sp.add_argument("id", type=int, help="the backfill id")
        if step != "show":
            sp.add_argument("--by", required=True, help="who takes the step")
        if step == "announce":
            sp.add_argument("--runs-at", type=_instant, help="when the recompute will run")
        if step == "replay":
            sp.add_argument(
                "--consumer",
                help="only this consumer (default: every unfinished "
                "one, in rank order; commands run here)",
            )
        finish(sp, "the backfill", _backfill)


def _add_probe(sub: Any, finish: Finish) -> None:
    """Add `driftgauge probe rerun`."""
    pr = sub.add_parser("probe", help="probe a partition step for idempotency")
    pr_sub = pr.add_subparsers(dest="probe_command", required=True, help="the probe")
    rr = pr_sub.add_parser(
        "rerun",
        help="run a step twice (--command) or compare two ledger "
        "runs of one window (--ledger): converged, or the rows appended; "
        "exits 1 unless converged",
    )
    rr.add_argument("check", help="the check whose reader view holds the step's output")
    rr.add_argument(
        "--command",
        help="the partition step (a shell command; its environment "
        "has DRIFTGAUGE_PARTITION_START/END); point the check at a staging copy",
    )
    rr.add_argument("--start", type=_instant, help="first partition start (with --command)")
    rr.add_argument("--end", type=_instant, help="end of the last partition (with --command)")
    rr.add_argument(
        "--ledger",
        action="store_true",
        help="compare the last two closed ledger runs of one window",
    )
    rr.add_argument("--window-start", type=_instant, help="the ledger window (default: latest)")
    rr.add_argument("--window-end", type=_instant, help="the ledger window's end")
    finish(rr, "the result", _probe)


def _add_watermark(sub: Any, finish: Finish) -> None:
    """Add `driftgauge watermark show|advance|move-back`."""
    wm = sub.add_parser("watermark", help="read or move a pipeline's watermark")
    wm_sub = wm.add_subparsers(dest="watermark_command", required=True, help="what to do")
    for name in ("show", "advance", "move-back"):
        sp = wm_sub.add_parser(name, help=f"{name} a pipeline's processed_through")
        sp.add_argument("pipeline", help="the pipeline's name")
        if name != "show":
            sp.add_argument("to", type=_instant, help="the new processed_through")
            sp.add_argument("--by", required=True, help="who moves it")
            sp.add_argument("--reason", required=True, help="why")
        if name == "advance":
            sp.add_argument("--check", help="the check over the pipeline's output")
            sp.add_argument(
                "--stall-after",
                type=float,
                metavar="SECONDS",
                dest="stall_after_seconds",
                help="no advance for this long is a watermark_stalled breach",
            )
        finish(sp, "the watermark", _watermark)


def run(config: Config, args: argparse.Namespace) -> int:
    """Run the repair command `args` names; print a refusal's rule and exit 2."""
    try:
        code: int = asyncio.run(args.repair(config, args))
        return code
    except Refused as exc:
        print(f"refused: {exc.step} ({exc.rule}): {exc.detail}", file=sys.stderr)
        return EXIT_ERROR
    except RepairError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR


@asynccontextmanager
async def _opened(config: Config) -> AsyncIterator[Repair]:
    from driftgauge.cli.shell import run_shell
    from driftgauge.repair.service import build_repair
    from driftgauge.state.store import StateStore
    from driftgauge.stores import open_adapter

    state = await StateStore.open(config.state)
    opened: dict[str, tuple[StoreAdapter, StoreAdapter]] = {}

    async def sides(check: str) -> tuple[StoreAdapter, StoreAdapter]:
        if check not in opened:
            c = config.checks[check]
            source = await open_adapter(c.source)
            try:
                opened[check] = (source, await open_adapter(c.reader))
            except BaseException:
                await source.close()
                raise
        return opened[check]

    try:
        yield build_repair(
            state.calls, config.checks, sides, lambda: datetime.now(UTC), run_command=run_shell
        )
    finally:
        for source, reader in opened.values():
            await source.close()
            await reader.close()
        await state.close()


def _json_default(value: Any) -> Any:
    """Render times as ISO 8601 (with the `T`), anything else as its string."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def _print(value: Answer, as_json: bool, lines: Callable[[Answer], list[str]]) -> None:
    if as_json:
        # Dumped as Python values, so times keep the offset they were read with.
        shown = value.model_dump(by_alias=True) if isinstance(value, BaseModel) else value
        print(json.dumps(shown, indent=2, default=_json_default))
    else:
        print("\n".join(lines(value)))


def _backfill_lines(bf: BackfillShown) -> list[str]:
    out = [
        f"backfill {bf.id} of {bf.check}: {bf.status} (next: {bf.next_step})",
        f"  {len(bf.targets)} partition(s) from {bf.first_bad.isoformat()}; "
        f"watermark reset point {bf.reset_to.isoformat()}",
    ]
    for c in bf.consumers:
        replay = c.replay.outcome if c.replay else "not replayed"
        out.append(
            f"  rank {c.rank} {c.name} ({c.kind}, owner {c.owner}"
            + (f", signed by {c.signed_by}" if c.signs else "")
            + f"): {replay}"
        )
    if bf.totals_before:
        out.append(f"  before: {bf.totals_before}")
    if bf.totals_after:
        out.append(f"  after:  {bf.totals_after}; diff {bf.diff}")
    return out


def _asked(model: type[Body], args: argparse.Namespace) -> Body:
    """Return the body the arguments of the same names ask for, checked as the API checks it."""
    try:
        return model.model_validate({name: getattr(args, name) for name in model.model_fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RepairInputError(str(first["loc"][0]), first["msg"]) from None


async def _backfill(config: Config, args: argparse.Namespace) -> int:
    # Imported here, as in _opened: every command (check included) builds this module's parser.
    from driftgauge.repair.models import PlanIn

    step = args.backfill_command
    # Checked before the state database opens: bad input costs no connection.
    asked = _asked(PlanIn, args) if step == "plan" else None
    async with _opened(config) as repair:
        b = repair.backfills
        if asked is not None:
            if asked.check not in config.checks:
                raise Refused("plan", "unknown_check", f"no such check {asked.check!r}", status=422)
            bf = await b.plan(asked)
        elif step == "announce":
            bf = await b.announce(args.id, by=args.by, runs_at=args.runs_at)
        elif step == "start":
            bf = await b.start(args.id, by=args.by)
        elif step == "verify":
            bf = await b.verify(args.id, by=args.by)
        elif step == "replay":
            bf = await repair.replays.replay(args.id, by=args.by, consumer=args.consumer)
        elif step == "close":
            bf = await b.close(args.id, by=args.by)
        else:
            bf = await b.show(args.id)
    _print(bf, args.json, _backfill_lines)
    return EXIT_OK


async def _probe(config: Config, args: argparse.Namespace) -> int:
    from driftgauge.cli.shell import run_shell

    if args.check not in config.checks:
        raise Refused("probe", "unknown_check", f"no such check {args.check!r}", status=422)
    async with _opened(config) as repair:
        out: RerunProbed
        if args.ledger:
            out = await repair.probe.ledger(
                args.check, window_start=args.window_start, window_end=args.window_end
            )
        else:
            if not (args.command and args.start and args.end):
                raise Refused(
                    "probe",
                    "missing_step",
                    "give --command, --start and --end (or --ledger)",
                    status=422,
                )
            out = await repair.probe.step(args.check, args.start, args.end, args.command, run_shell)

    def lines(res: RerunProbed) -> list[str]:
        rows = [f"rerun probe of {res.check} ({res.mode}: {res.subject}): {res.verdict}"]
        for p in res.partitions:
            rows.append(
                f"  {p.start.isoformat()}: {p.verdict}, count "
                f"{p.run1['count']} after run 1, {p.run2['count']} after run 2"
                + (f", {p.appended} appended" if p.appended else "")
            )
        return rows

    _print(out, args.json, lines)
    return EXIT_OK if out.verdict == "converged" else EXIT_FINDING


async def _watermark(config: Config, args: argparse.Namespace) -> int:
    from driftgauge.repair.models import WatermarkMove

    # Checked before the state database opens: bad input costs no connection.
    move = _asked(WatermarkMove, args) if args.watermark_command == "advance" else None
    async with _opened(config) as repair:
        w = repair.watermarks
        if move is not None:
            out = await w.advance(args.pipeline, move)
        elif args.watermark_command == "move-back":
            out = await w.move_back(args.pipeline, args.to, by=args.by, reason=args.reason)
        else:
            out = await w.get(args.pipeline)

    def lines(wm: WatermarkShown) -> list[str]:
        rows = [
            f"{wm.pipeline}: processed through {wm.processed_through.isoformat()} "
            f"(by {wm.updated_by}: {wm.reason})"
        ]
        rows += [
            f"  {m.moved_at.isoformat()} {m.direction} to {m.to.isoformat()} by {m.by}: {m.reason}"
            for m in wm.moves[:10]
        ]
        return rows

    _print(out, args.json, lines)
    return EXIT_OK
