"""`make bench-faults`: run the fault bench and write its section of bench/RESULTS.md.

    .venv/bin/python bench/faults/run.py                 # the whole set (40 days)
    .venv/bin/python bench/faults/run.py --days 6 --onset 3 --faults key_rename \\
        --no-ablations --sweep none --no-write           # a quick look

Exits 1 when the acceptance does not hold: reconciliation plus ledger must catch every
fault that ran, and the healthy baseline must raise no alarm.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import platform
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import httpx

import driftgauge
from faults.bench import FAULT_NAMES, SWEEP, BenchResult, BenchSpec, run_bench
from faults.detectors import DETECTORS
from faults.report import section, write_artifact, write_section
from faults.world import OS_URL, PG_DSN, TIMEOUT

ROOT = Path(__file__).resolve().parents[2]


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=40)
    p.add_argument("--onset", type=int, default=20, help="day the fault switches on")
    p.add_argument("--scale", type=float, default=1.0, help="tasks per day, relative")
    p.add_argument(
        "--faults", default=",".join(FAULT_NAMES), help="comma-separated fault names, or 'none'"
    )
    p.add_argument("--no-healthy", action="store_true", help="skip the healthy baseline")
    p.add_argument("--no-ablations", action="store_true", help="run only the full check")
    p.add_argument(
        "--sweep",
        default=",".join(f"{r:g}" for r in SWEEP),
        help="vocabulary-drift rates, or 'none'",
    )
    p.add_argument("--parallel", type=int, default=2, help="scenarios at a time")
    p.add_argument("--keep", action="store_true", help="keep the stores for inspection")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    p.add_argument("--artifact", type=Path, default=ROOT / "bench" / "faults" / "last_run.json")
    p.add_argument("--no-write", action="store_true", help="print the section only")
    args = p.parse_args(argv)
    if not 1 <= args.onset < args.days:
        p.error(f"--onset: must be between 1 and --days - 1 ({args.days - 1})")
    known = set(FAULT_NAMES)
    args.fault_list = () if args.faults == "none" else tuple(args.faults.split(","))
    for name in args.fault_list:
        if name not in known:
            p.error(f"--faults: unknown fault {name!r} (known: {', '.join(FAULT_NAMES)})")
    try:
        args.rates = () if args.sweep == "none" else tuple(float(r) for r in args.sweep.split(","))
    except ValueError:
        p.error(f"--sweep: {args.sweep!r} is not a comma-separated list of rates")
    if any(not 0 < r < 1 for r in args.rates):
        p.error("--sweep: every rate must be between 0 and 1")
    return args


async def versions() -> dict[str, str]:
    """Return the versions of the stores, Python and driftgauge the bench ran on."""
    conn = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    try:
        pg = str(await conn.fetchval("SHOW server_version", timeout=TIMEOUT)).split()[0]
    finally:
        await conn.close()
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        os_version = (await client.get(OS_URL)).json()["version"]["number"]
    return {
        "driftgauge": driftgauge.__version__,
        "Python": platform.python_version(),
        "PostgreSQL": pg,
        "OpenSearch": os_version,
    }


def accepted(result: BenchResult) -> list[str]:
    """Return why the acceptance does not hold (empty when it does)."""
    problems = []
    healthy = result.outcomes.get("healthy")
    if healthy is not None:
        loud = [d for d in DETECTORS if healthy.hours(d) is not None]
        if loud:
            problems.append(f"healthy baseline: alarms from {', '.join(loud)}")
    for name in FAULT_NAMES:
        o = result.outcomes.get(name)
        if o is not None and o.hours("ledger") is None and o.hours("reconciliation") is None:
            problems.append(f"{name}: neither reconciliation nor the ledger fired")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Run the bench, write the results and return the exit status."""
    args = _args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("fault_bench").setLevel(logging.INFO)
    for name in ("fault_bench.syncjob", "driftgauge"):
        # The runs' own warnings (breaches, failed canaries) are the results, tabled below.
        logging.getLogger(name).setLevel(logging.ERROR)
    spec = BenchSpec(
        days=args.days,
        onset=args.onset,
        scale=args.scale,
        faults=args.fault_list,
        healthy=not args.no_healthy,
        ablations=not args.no_ablations,
        sweep=args.rates,
        parallel=args.parallel,
        keep=args.keep,
    )
    command = (
        "make bench-faults"
        if argv is None and len(sys.argv) == 1
        else "python bench/faults/run.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    )
    found = asyncio.run(versions())
    result = asyncio.run(run_bench(spec))
    text = section(result, command, found)
    if args.no_write:
        print(text)
    else:
        write_section(args.results, text)
        write_artifact(args.artifact, result, command, found)
        print(text)
        print(f"wrote {args.results} and {args.artifact}")
    problems = accepted(result)
    for problem in problems:
        print(f"acceptance: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
