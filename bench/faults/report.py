"""The results page: the matrix, the healthy baseline, the ablations and the drift sweep.

The section goes between markers in bench/RESULTS.md; other sections of that file are
left as they are. The seed's figures sit beside the bench's in every table.
"""

from __future__ import annotations

import json
import os
import platform
import re
from pathlib import Path
from typing import Any

from faults import checks as bench_checks
from faults.bench import FAULT_NAMES, BenchResult
from faults.detectors import DETECTORS, Outcome
from faults.faults import by_name
from faults.world import day_start

BEGIN = "<!-- begin:fault-bench -->"
END = "<!-- end:fault-bench -->"
NEVER = "\u00b7"
HEADERS = {
    "error_rate": "error rate",
    "status": "status",
    "freshness": "freshness",
    "canary": "canary",
    "ledger": "ledger",
    "reconciliation": "recon",
}
# The seed's matrix (hours from fault start to first alarm; None: never in 20 days).
SEED: dict[str, tuple[int | None, ...]] = {
    "permission_loss": (None, 26, 50, 0, 26, 26),
    "key_rename": (None, None, 50, None, 26, 26),
    "vocabulary_drift": (None, None, None, None, None, 26),
    "source_ttl": (None, None, None, None, None, 26),
    "disk_full": (None, 26, 74, 36, 26, 26),
    "scroll_429": (26, None, None, None, 26, 26),
    "retry_merge": (None, None, None, None, 26, None),
    "retry_append": (None, None, None, None, 26, 26),
    "lost_update": (None, None, None, None, None, 26),
}
SEED_SWEEP = {0.01: None, 0.02: 74, 0.03: 74, 0.04: 50, 0.05: 50, 0.10: 26}


def _h(hours: float | None) -> str:
    if hours is None:
        return NEVER
    return f"{hours:.1f}".replace("-0.0", "0.0")


def _seed(hours: int | None) -> str:
    return NEVER if hours is None else str(hours)


def matrix(result: BenchResult) -> list[str]:
    """Return the fault x detector table, the bench's hours with the seed's in parentheses."""
    head = ["fault", *(HEADERS[d] for d in DETECTORS), "first harm"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    caught = dict.fromkeys(DETECTORS, 0)
    seed_caught = dict.fromkeys(DETECTORS, 0)
    both = 0
    ran = [f for f in FAULT_NAMES if f in result.outcomes]
    for name in ran:
        o = result.outcomes[name]
        cells = [by_name(name).title]
        for i, d in enumerate(DETECTORS):
            hours = o.hours(d)
            caught[d] += hours is not None
            seed_caught[d] += SEED[name][i] is not None
            cells.append(f"{_h(hours)} ({_seed(SEED[name][i])})")
        both += o.hours("ledger") is not None or o.hours("reconciliation") is not None
        cells.append(f"+{by_name(name).damage:.1f} h")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        "| caught | "
        + " | ".join(f"{caught[d]}/{len(ran)} ({seed_caught[d]}/{len(ran)})" for d in DETECTORS)
        + " | |"
    )
    lines.append("")
    lines.append(f"Reconciliation plus ledger: **{both}/{len(ran)}** (seed: 9/9).")
    return lines


def baseline(result: BenchResult) -> list[str]:
    """Return the healthy baseline: how often each detector was asked, and its alarms."""
    o = result.outcomes.get("healthy")
    if o is None:
        return ["(the healthy baseline did not run)"]
    c = o.counts
    days = (o.end - o.since).days
    alarms = [d for d in DETECTORS if o.hours(d) is not None]
    verdict = "no alarm" if not alarms else "alarms: " + ", ".join(HEADERS[d] for d in alarms)
    return [
        f"Healthy baseline, {days} simulated days: **{verdict}** (seed: none in 40 days).",
        "",
        "| detector | asked | alarms |",
        "|---|---|---|",
        f"| error rate | {c.get('sync_runs', 0)} sync runs, daily dashboard probe | "
        f"{_n(o, 'error_rate')} |",
        f"| status | {c.get('sync_runs', 0)} summary lines | {_n(o, 'status')} |",
        f"| freshness | continuous (36 h without a successful write) | {_n(o, 'freshness')} |",
        f"| canary | {c.get('canary_runs', 0)} attempts | {c.get('canary_failed', 0)} |",
        f"| ledger | {c.get('ledger_windows', 0)} windows judged | "
        f"{c.get('ledger_breaches', 0)} breaches |",
        f"| reconciliation | {c.get('recon_runs', 0)} runs "
        f"({c.get('recon_failed_runs', 0)} failed) | "
        f"{c.get('recon_drift_runs', 0)} with a drifting bucket |",
    ]


def _n(o: Outcome, detector: str) -> str:
    return "0" if o.hours(detector) is None else "1+"


def ablations(result: BenchResult) -> list[str]:
    """Return each variant against the fault the seed found it blind to, and on healthy days."""
    lines = [
        "| variant (a different config of the same check) | seed: blind to | bench: fault "
        "| full check (h) | variant (h) | retry \u00d73, merge (h) | "
        "healthy: drifting of judged days |",
        "|---|---|---|---|---|---|---|",
    ]
    healthy = result.outcomes.get("healthy")
    merge = result.outcomes.get("retry_merge")
    for v in bench_checks.VARIANTS:
        days = _days(healthy, v.name)
        merged = _h(merge.hours(v.name)) if merge and v.name in merge.drifted_days else "n/a"
        if v.seed_blind_to:
            o = result.outcomes.get(v.seed_blind_to)
            title = by_name(v.seed_blind_to).title
            full = _h(o.hours(bench_checks.MAIN)) if o else "n/a"
            mine = _h(o.hours(v.name)) if o and v.name in o.drifted_days else "n/a"
            lines.append(f"| {v.title} | {title} | {title} | {full} | {mine} | {merged} | {days} |")
        else:
            lines.append(
                f"| {v.title} | nothing: alarms every healthy day | healthy | "
                f"{_days(healthy, bench_checks.MAIN)} days drift | {days} days drift "
                f"| {merged} | {days} |"
            )
    return lines


def _days(o: Outcome | None, check: str) -> str:
    if o is None or check not in o.drifted_days:
        return "n/a"
    return f"{o.drifted_days[check]} of {o.judged_days.get(check, 0)}"


def sweep(result: BenchResult) -> list[str]:
    """Return the vocabulary-drift sweep: the seed's 5% check and the check with reasons."""
    lines = [
        "| drift | seed: 5% tolerance | bench: 5% tolerance, no reasons | bench: "
        "exclusions with reason, zero tolerance |",
        "|---|---|---|---|",
    ]
    for rate, seed in SEED_SWEEP.items():
        o = result.outcomes.get(f"drift_{round(rate * 100)}pct")
        if o is None:
            continue
        lines.append(
            f"| {rate:.0%} | {_seed(seed)} | {_h(o.hours(bench_checks.SEED_CHECK))} "
            f"| {_h(o.hours(bench_checks.MAIN))} |"
        )
    return lines


def environment(versions: dict[str, str]) -> list[str]:
    """Return the machine and versions lines."""
    cpu = _cpu_model()
    mem = _mem_gib()
    return [
        f"- machine: {cpu}, {os.cpu_count()} cores (shared), {mem} RAM, "
        f"{platform.system()} {platform.release()}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
    ]


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    found = re.search(r"model name\s*:\s*(.+)", text)
    return found.group(1).strip() if found else "unknown CPU"


def _mem_gib() -> str:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"MemTotal:\s*(\d+) kB", text)
    return f"{int(found.group(1)) / 2**20:.0f} GiB" if found else "unknown"


def section(result: BenchResult, command: str, versions: dict[str, str]) -> str:
    """Return the whole "Fault bench" section, between its markers."""
    spec = result.spec
    started = result.started.strftime("%Y-%m-%d %H:%M %Z") if result.started else "?"
    out = [
        BEGIN,
        "## Fault bench",
        "",
        f"- command: `{command}`",
        f"- date: {started}; wall time {result.wall_seconds / 60:.1f} min "
        f"(history {result.seconds.get('history', 0):.0f} s, then "
        f"{len(result.outcomes)} scenarios, {spec.parallel} at a time)",
        *environment(versions),
        "- traceability: every alarm below is a stored driftgauge result; run ids, breach "
        "keys and canary ids are in `bench/faults/last_run.json`",
        "",
        _setup(spec),
        "",
        "### Hours from fault start to first alarm",
        "",
        "Bench hours, the seed's in parentheses; " + NEVER + " never fired in the "
        f"{spec.days - spec.onset} days after onset.",
        "",
        *matrix(result),
        "",
        *_timing_note(),
        "",
        "### Healthy baseline",
        "",
        *baseline(result),
        "",
        "### How each fault is produced",
        "",
        *_hows(result),
        "",
        "### Ablations",
        "",
        "Each variant is the full check with one choice changed in its driftgauge config, "
        "run beside it on the fault the seed found it blind to, on the idempotent retry "
        "and on the healthy days (hours to first alarm).",
        "",
        *ablations(result),
        "",
        "### Vocabulary-drift sweep",
        "",
        "Hours from onset to the first alarm (" + NEVER + ": never in "
        f"{spec.days - spec.onset} days); a share of the tasks from onset is labelled with "
        "a tier the dashboard's filter does not know. Drifted tasks first reach the index "
        "with the onset day's sync, the next day at 01:00 (+25 h): an alarm at +25.3 h is "
        "the first run after onset.",
        "",
        *sweep(result),
        "",
        END,
    ]
    return "\n".join(out) + "\n"


def _setup(spec: Any) -> str:
    shape = spec.shape
    return (
        f"{spec.days} simulated days from {day_start(0).date()}, {shape.tasks_min} to "
        f"{shape.tasks_max} completed tasks a day, {shape.unjoinable:.0%} without a join "
        f"key, {shape.no_document:.1%} of keys with no document; one fault switches on at "
        f"the start of day {spec.onset}. The sync job of day d runs at d+1 01:00 (60 ms a "
        "group, 900 s budget) against a real PostgreSQL task store and a real OpenSearch "
        "index and reports to driftgauge's run ledger with `LedgerClient` through the "
        "ledger's HTTP routes (served in-process, so they run on the bench's clock). "
        "driftgauge's run-closed hook reconciles the run's window 15 min after its summary "
        "and every check makes a full pass daily at 03:00, both through driftgauge's "
        "runner with the ledger's exclusions; the ledger judges each window at its 06:00 "
        "deadline; driftgauge's canary runs daily at 12:00 and after a deploy. The three "
        "classic alarms are computed from the job's own outputs: its exit, its summary "
        "line, its successful writes and a daily probe of the dashboard query."
    )


def _timing_note() -> list[str]:
    return [
        "The seed's run-based detectors see a fault 26 h after onset: there the first "
        "affected sync is the one for day 20, at day 21 01:00, checked an hour later. Here a "
        "fault acts from 00:00 on day 20, so faults in the job or the index already hit the "
        "01:00 sync of that day (+1 h); faults in the upstream's data reach the index with "
        "the next day's sync (+25 h). The last column says which; driftgauge alarms 15 to "
        "20 min after that run (the ledger at its summary, reconciliation after the settle "
        "delay), or at the next 03:00 full pass when the damage is in old buckets or the job "
        "never reported. The seed checks once a day; freshness and the canary here fire at "
        "their own times."
    ]


def _hows(result: BenchResult) -> list[str]:
    out = []
    for name in FAULT_NAMES:
        if name not in result.outcomes:
            continue
        fault = by_name(name, result.spec.drift_rate)
        report = result.outcomes[name].first_report
        out.append(
            f"- **{fault.title}**: {fault.how}. First affected run printed: `{report}`"
            if report
            else f"- **{fault.title}**: {fault.how}."
        )
    return out


def write_section(path: Path, text: str) -> None:
    """Put the section in the results file, replacing an earlier one, keeping the rest."""
    before = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    if BEGIN in before and END in before:
        head, rest = before.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        after = head + text + ("\n" + tail if tail else "")
    else:
        after = before.rstrip("\n") + "\n\n" + text
    path.write_text(after, encoding="utf-8")


def write_artifact(path: Path, result: BenchResult, command: str, versions: dict[str, str]) -> None:
    """Write the run's stored-result references (ids, breach keys) as JSON."""
    body = {
        "command": command,
        "versions": versions,
        "started": result.started.isoformat() if result.started else None,
        "wall_seconds": round(result.wall_seconds, 1),
        "seconds": {k: round(v, 1) for k, v in result.seconds.items()},
        "spec": {k: v for k, v in vars(result.spec).items()},
        "scenarios": {k: o.to_dict() for k, o in sorted(result.outcomes.items())},
    }
    path.write_text(json.dumps(body, indent=1, default=str) + "\n", encoding="utf-8")
