"""Run the benchmarks and rewrite their sections of bench/RESULTS.md.

Each benchmark is its own script printing one JSON report; this runs them in one go on
this machine, side by side with their peer (reladiff) or floor, and records the machine,
versions and commands so the figures can be re-run. Sections written by other tools
(e.g. the fault bench) are kept as they are.

    .venv/bin/python bench/run.py [--rows 1000000] [--big-rows 5000000] [--skip NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
PY = sys.executable


def run_json(args: list[str]) -> dict[str, Any]:
    """Run a benchmark script and return its JSON report."""
    print("+", " ".join(args), file=sys.stderr, flush=True)
    done = subprocess.run([PY, *args], capture_output=True, text=True, check=False, cwd=HERE.parent)
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} failed:\n{done.stderr[-3000:]}")
    out = done.stdout
    return json.loads(out[out.index("{") :])


def machine() -> str:
    """Return a line describing this machine and the versions in play."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        int(line.split()[1]) // 1024 // 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    pg = subprocess.run(["psql", "--version"], capture_output=True, text=True).stdout.strip()
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem} GiB RAM; Python {platform.python_version()};"
        f" {pg}; OpenSearch 2.19.1 (single node, 1 GB heap); reladiff 0.6.0"
    )


def section(name: str, body: str) -> None:
    """Replace (or append) one marked section of RESULTS.md."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start, end = f"<!-- begin:{name} -->", f"<!-- end:{name} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _: block, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + block + "\n"
    )
    RESULTS.write_text(text)


def pg_pg(r: dict[str, Any], big: dict[str, Any] | None) -> str:
    """Return the PostgreSQL → PostgreSQL section."""
    rd = r.get("reladiff_drift")
    dg, new = r["driftgauge_drift"], r["driftgauge_drift_new"]
    clean, clean_slots = r["driftgauge_clean"], r["driftgauge_clean_slots"]

    def row(name: str, m: dict[str, Any]) -> str:
        f = m["found"]
        return (
            f"| {name} | {m['wall_s']:.2f} | {m['rss_mb']:.0f} | {f['missing']} | "
            f"{f['extra']} | {f['mismatched']} |"
        )

    lines = [
        f"## PostgreSQL → PostgreSQL, {r['rows']:,} rows over 40 days",
        "",
        f"Planted drift: {r['planted']['missing']} missing (0.1%), {r['planted']['extra']} "
        f"extra (0.01%), {r['planted']['mismatched']} mismatched (0.05%), spread over every "
        "day. Median of the runs; each tool is a separate process. driftgauge's first pass "
        "is pinned to what the service picks from its stored verdicts (the bench stores "
        "none): day aggregates plus each day's slots when no day of the window was judged "
        "yet or the last verdict of one is drift, day aggregates only when the judged days "
        "were all healthy.",
        "",
        "| run | wall s | peak RSS MB | missing | extra | mismatched |",
        "|---|---|---|---|---|---|",
        row("driftgauge, drift: first run, or drift on record (first pass: days + slots)", dg),
        row("driftgauge, drift in days last judged healthy (first pass: days)", new),
    ]
    if rd:
        lines.append(row("reladiff 0.6.0 hashdiff, drift", rd))
    lines += [
        row("driftgauge, no drift, judged healthy before (first pass: days)", clean),
        row(
            "driftgauge, no drift: first run, or first run after a repair (days + slots)",
            clean_slots,
        ),
        f"| floor: one per-day count + digest query per side, concurrently | "
        f"{r['floor_s']:.2f} | | | | |",
        "",
    ]
    if rd:
        lines.append(
            f"driftgauge / reladiff with drift: **{dg['wall_s'] / rd['wall_s']:.2f}** "
            f"({new['wall_s'] / rd['wall_s']:.2f} when the drift lands in days last "
            "judged healthy; target < 0.25).  "
        )
    lines.append(
        f"driftgauge without drift / floor: **{clean['wall_s'] / r['floor_s']:.2f}** "
        f"({clean_slots['wall_s'] / r['floor_s']:.2f} for a first run or the one run "
        "after a repair; "
        "target ≤ 1.5; driftgauge's time includes starting Python and the exact "
        "distinct-key count the floor query leaves out)."
    )
    if big:
        bdg, bnew = big["driftgauge_drift"], big["driftgauge_drift_new"]
        lines += [
            "",
            f"Memory: peak RSS of the driftgauge process with drift is "
            f"{dg['rss_mb']:.0f} MB (days + slots) / {new['rss_mb']:.0f} MB (days) at "
            f"{r['rows']:,} rows and {bdg['rss_mb']:.0f} / {bnew['rss_mb']:.0f} MB at "
            f"{big['rows']:,} rows ({bdg['wall_s']:.1f} s / {bnew['wall_s']:.1f} s, "
            f"found {bdg['found']}); planted {big['planted']}.",
        ]
    return "\n".join(lines)


def pg_os(r: dict[str, Any]) -> str:
    """Return the PostgreSQL → OpenSearch section."""
    m = r["median"]
    return "\n".join(
        [
            f"## PostgreSQL → OpenSearch, {r['rows']:,} rows over 40 days",
            "",
            "Same source table and planted drift; the reader is a one-shard index. driftgauge "
            "runs as on a first run: both sides return each day's slots with their first scan.",
            "",
            "| wall s (median, min–max) | rows/s | peak RSS MB | queries | rows fetched | "
            "source share | reader share | missing | extra | mismatched |",
            "|---|---|---|---|---|---|---|---|---|---|",
            f"| {m['wall_s']:.2f} ({r['min_wall_s']:.2f}–{r['max_wall_s']:.2f}) | "
            f"{m['rows_per_s']:,} | {m['rss_mb']:.0f} | {m['queries']} | {m['rows_fetched']:,} | "
            f"{m['share_source']:.0%} | {m['share_reader']:.0%} | {m['found']['missing']} | "
            f"{m['found']['extra']} | {m['found']['mismatched']} |",
            "",
            "The shares are each store's part of the time spent waiting on stores (the two "
            "sides are queried concurrently).",
        ]
    )


def api(r: dict[str, Any]) -> str:
    """Return the API load section."""
    rows = "\n".join(f"| {k} | {v} |" for k, v in r.items() if not isinstance(v, dict | list))
    return (
        "## Drill-down API under load\n\n"
        + "`bench/api_load.py`: `driftgauge serve` with planted drift, loaded from a second "
        "process (httpx, loopback).\n\n| measure | value |\n|---|---|\n" + rows
    )


def main() -> None:
    """Run everything asked for and rewrite RESULTS.md."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--big-rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip", nargs="*", default=[], choices=["pg", "big", "os", "api"])
    args = ap.parse_args()
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    section(
        "machine",
        f"Measured {now} on {machine()}.\n\nRe-run: `make bench` "
        "(`.venv/bin/python bench/run.py`); each script also runs alone and prints JSON.",
    )
    if "pg" not in args.skip:
        r = run_json(
            ["bench/pg_vs_reladiff.py", "--rows", str(args.rows), "--repeat", str(args.repeat)]
        )
        big = (
            None
            if "big" in args.skip
            else run_json(
                [
                    "bench/pg_vs_reladiff.py",
                    "--rows",
                    str(args.big_rows),
                    "--repeat",
                    "1",
                    "--skip-reladiff",
                ]
            )
        )
        section("pg-pg", pg_pg(r, big))
    if "os" not in args.skip:
        section(
            "pg-os",
            pg_os(
                run_json(
                    [
                        "bench/pg_vs_opensearch.py",
                        "--rows",
                        str(args.rows),
                        "--repeat",
                        str(args.repeat),
                    ]
                )
            ),
        )
    if "api" not in args.skip:
        section("api", api(run_json(["bench/api_load.py"])))
    print(RESULTS.read_text())


if __name__ == "__main__":
    main()
