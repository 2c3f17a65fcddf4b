"""`driftgauge calibrate`: measure each side's digests' cost for the planner, and keep it."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, date, datetime
from typing import Any

from driftgauge.cli.common import EXIT_OK, check_named, log_options, with_config
from driftgauge.config.frozen import Check, Config
from driftgauge.engine import cost


def add_commands(sub: Any) -> None:
    """Add `calibrate` to the CLI's subparsers."""
    cal = sub.add_parser(
        "calibrate",
        help="time each side's day scan and difference digests' scan over a check's window "
        "and keep the ratio per store, for the planner (engine.cost)",
    )
    cal.add_argument("name", help="the check's name under checks: in the config")
    with_config(cal)
    cal.add_argument("--since", type=date.fromisoformat, help="first day (YYYY-MM-DD)")
    cal.add_argument("--until", type=date.fromisoformat, help="last day, inclusive")
    cal.add_argument("--full", action="store_true", help="the full-history window")
    cal.add_argument("--rounds", type=int, default=3, help="rounds of both scans (default 3)")
    cal.add_argument("--json", action="store_true", help="print the measures as JSON")
    cal.add_argument("--no-store", action="store_true", help="print the measures, keep nothing")
    log_options(cal, "WARNING", "text")


def run(config: Config, args: argparse.Namespace) -> int:
    """Measure both sides of the check, print the ratios and keep them (unless --no-store)."""
    return asyncio.run(_calibrate(config, args))


async def _calibrate(config: Config, args: argparse.Namespace) -> int:
    from driftgauge.cli.check import window
    from driftgauge.cli.sides import opened_sides
    from driftgauge.engine.calibrate import Calibration, calibrate
    from driftgauge.engine.plan import day_starts
    from driftgauge.stores.preflight import preflight

    check = check_named(config, args.name)
    start, end = window(check, args, datetime.now(UTC))
    days = len(day_starts(start, end, check.timezone))
    got: list[Calibration] = []
    async with opened_sides(check) as (source, reader):
        await preflight(check, source, reader)
        for view, adapter in ((check.source, source), (check.reader, reader)):
            got.append(
                await calibrate(view.store.name, view.kind, adapter, start, end, days, args.rounds)
            )
    if not args.no_store:
        await _keep(config, got)
    print(_render(check, got, args.json, kept=not args.no_store))
    return EXIT_OK


async def _keep(config: Config, got: list[Any]) -> None:
    """Keep each store's measured ratio in the state database."""
    from driftgauge.state.store import StateStore

    state = await StateStore.open(config.state)
    try:
        now = datetime.now(UTC)
        for c in got:
            await state.costs.save(c.store, c.kind, c.digest_pass, c.rows, now)
    finally:
        await state.close()


def _render(check: Check, got: list[Any], as_json: bool, *, kept: bool) -> str:
    """Return the measures as a table, or as JSON."""
    rows = [
        {
            "store": c.store,
            "kind": c.kind,
            "rows": c.rows,
            "width": c.width,
            "days_seconds": [round(s, 4) for s in c.days_seconds],
            "digests_seconds": [round(s, 4) for s in c.digests_seconds],
            "digest_pass": round(c.digest_pass, 3),
        }
        for c in got
    ]
    slower = max(r["digest_pass"] for r in rows)
    threshold = 1 - 1 / slower if slower > 1 else 0.0
    if as_json:
        return json.dumps(
            {"check": check.name, "stores": rows, "kept": kept, "digests_first_above": threshold},
            indent=2,
        )
    lines = [f"{'store':<16} {'kind':<14} {'rows':>12} {'day scan s':>11} {'digests s':>10} ratio"]
    for r in rows:
        med = sorted(r["days_seconds"])[len(r["days_seconds"]) // 2]
        dig = sorted(r["digests_seconds"])[len(r["digests_seconds"]) // 2]
        lines.append(
            f"{r['store']:<16} {r['kind']:<14} {r['rows']:>12,} {med:>11.3f} {dig:>10.3f}"
            f" {r['digest_pass']:.2f}x"
        )
    lines.append(
        f"the planner puts digests in the first scan when stored drift covers more than "
        f"{threshold:.0%} of a window's days (default {1 - 1 / cost.DIGEST_PASS:.0%})"
    )
    lines.append("kept in the state database" if kept else "nothing kept (--no-store)")
    return "\n".join(lines)
