"""Fleet bench: hundreds of checks on several real `driftgauge serve` replicas, the exporter killed.

Builds one small table per check in a source and a reader database on the local
PostgreSQL (a share of the checks read an OpenSearch index instead), plants drift in a
few, starts the replicas on one state database, kills the exporter with SIGKILL half way, and
reads back from the state database and from every replica's /metrics:

- every scheduled tick ran exactly once (none missed, none twice), before and after the kill;
- how the runs spread over the replicas, and tick lateness (start - scheduled time) p50/p99;
- the state database's load: transactions per minute and connections per replica;
- each replica's peak RSS;
- the runs the dashboard's panels count (summed over the replicas' /metrics) against
  the state database's count.

Usage: python bench/fleet.py [--checks 500] [--replicas 3] [--minutes 12] [--write]
(`make bench-fleet`). With --write the figures go to bench/RESULTS.md ("Fleet").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address

ROOT = Path(__file__).resolve().parents[1]
PG = address("DRIFTGAUGE_TEST_PG_DSN")
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
ROWS = 40
DRIFTED_EVERY = 100  # one check in a hundred has drift planted
PREFIX = "dg_fleet"


def dsn_of(db: str) -> str:
    """Return the local PostgreSQL DSN of database `db`."""
    return PG.rsplit("/", 1)[0] + "/" + db


async def make_databases() -> None:
    """Create the bench's source, reader and state databases afresh."""
    admin = await asyncpg.connect(PG)
    try:
        for side in ("src", "dst", "state"):
            await admin.execute(f"DROP DATABASE IF EXISTS {PREFIX}_{side} WITH (FORCE)")
            await admin.execute(f"CREATE DATABASE {PREFIX}_{side}")
    finally:
        await admin.close()


def rows_of(i: int, now: datetime) -> list[tuple[str, datetime, str]]:
    """Return check i's rows: ROWS tasks over the two days before `now`, two hours settled."""
    start = now - timedelta(days=2)
    return [
        (f"c{i}-t{j:03d}", start + timedelta(seconds=j * 40 * 3600 // ROWS), f"label{j % 3}")
        for j in range(ROWS)
    ]


async def fill_pg(checks: list[int], now: datetime) -> None:
    """Write every PostgreSQL check's source and reader table; plant drift in a few."""
    src = await asyncpg.connect(dsn_of(f"{PREFIX}_src"))
    dst = await asyncpg.connect(dsn_of(f"{PREFIX}_dst"))
    try:
        for i in checks:
            rows = rows_of(i, now)
            for conn, data in ((src, rows), (dst, rows[2:] if i % DRIFTED_EVERY == 0 else rows)):
                await conn.execute(
                    f"CREATE TABLE t{i} (task_id text PRIMARY KEY,"
                    " completed_at timestamptz NOT NULL, label text)"
                )
                await conn.copy_records_to_table(f"t{i}", records=data)
    finally:
        await src.close()
        await dst.close()


async def fill_os(checks: list[int], now: datetime) -> None:
    """Write one OpenSearch index per OpenSearch check (its source table too)."""
    src = await asyncpg.connect(dsn_of(f"{PREFIX}_src"))
    async with httpx.AsyncClient(base_url=OS_URL, timeout=60) as http:
        for i in checks:
            rows = rows_of(i, now)
            await src.execute(
                f"CREATE TABLE t{i} (task_id text PRIMARY KEY,"
                " completed_at timestamptz NOT NULL, label text)"
            )
            await src.copy_records_to_table(f"t{i}", records=rows)
            index = f"{PREFIX}-{i}"
            await http.delete(f"/{index}")
            mapping = {
                "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                "mappings": {
                    "properties": {
                        "task_id": {"type": "keyword"},
                        "completed_at": {"type": "date"},
                        "label": {"type": "keyword"},
                    }
                },
            }
            (await http.put(f"/{index}", json=mapping)).raise_for_status()
            kept = rows[1:] if i % DRIFTED_EVERY == 0 else rows
            body = "".join(
                json.dumps({"index": {"_id": k}})
                + "\n"
                + json.dumps({"task_id": k, "completed_at": t.isoformat(), "label": lab})
                + "\n"
                for k, t, lab in kept
            )
            resp = await http.post(
                f"/{index}/_bulk?refresh=true",
                content=body,
                headers={"Content-Type": "application/x-ndjson"},
            )
            resp.raise_for_status()
    await src.close()


def config_text(pg_checks: list[int], os_checks: list[int], every: str) -> str:
    """Return the fleet's config: one check per table or index, all on one schedule."""
    lines = [
        "stores:",
        f'  src: {{kind: postgres, dsn: "{dsn_of(PREFIX + "_src")}", pool_max: 8,'
        " max_concurrent_queries: 8}",
        f'  dst: {{kind: postgres, dsn: "{dsn_of(PREFIX + "_dst")}", pool_max: 8,'
        " max_concurrent_queries: 8}",
        f"  os: {{kind: opensearch, url: {OS_URL}, max_concurrent_queries: 8}}",
        f'state: {{dsn: "{dsn_of(PREFIX + "_state")}", schema: fleet}}',
        "checks:",
    ]
    for i in sorted(pg_checks + os_checks):
        reader = (
            f"{{store: os, index: {PREFIX}-{i}, key: task_id, time: completed_at}}"
            if i in os_checks
            else f"{{store: dst, table: t{i}, key: task_id, time: completed_at}}"
        )
        lines += [
            f"  c{i:03d}:",
            f"    source: {{store: src, table: t{i}, key: task_id, time: completed_at}}",
            f"    reader: {reader}",
            "    fields: {label: string}",
            "    settle: 1h",
            f"    schedule: {{recent: {{every: {every}, days: 3}}}}",
        ]
    return "\n".join(lines) + "\n"


def start(config: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start one `driftgauge serve` replica."""
    exe = ROOT / ".venv" / "bin" / "driftgauge"
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                str(exe),
                "serve",
                "--config",
                str(config),
                *("--host", "127.0.0.1"),
                *("--port", str(port)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )


def rss_mb(pid: int) -> float:
    """Return a process's resident set size in MB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def state_load(conn: asyncpg.Connection) -> tuple[int, int]:
    """Return the state database's committed transactions so far and its open connections."""
    xacts = await conn.fetchval(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1",
        f"{PREFIX}_state",
    )
    conns = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        f"{PREFIX}_state",
    )
    return int(xacts), int(conns)


def percentile(values: list[float], q: float) -> float:
    """Return the q-quantile (0..1) of `values` by nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def scrape(ports: list[int]) -> tuple[dict[str, float], list[int]]:
    """Return driftgauge_check_runs_total per status summed over the replicas' /metrics, and
    the ports whose replica says it is the exporter."""
    total: dict[str, float] = {}
    leaders: list[int] = []
    async with httpx.AsyncClient(timeout=30) as http:
        for port in ports:
            try:
                text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            except httpx.TransportError:
                continue
            for fam in text_string_to_metric_families(text):
                for s in fam.samples:
                    if s.name == "driftgauge_check_runs_total":
                        st = s.labels["status"]
                        total[st] = total.get(st, 0) + s.value
                    elif s.name == "driftgauge_exporter_leader" and s.value == 1:
                        leaders.append(port)
    return {k: v for k, v in total.items() if v}, leaders


async def finished_by_status(state: asyncpg.Connection) -> tuple[dict[str, int], int]:
    """Return the state database's finished runs per status, and the runs still running."""
    rows = await state.fetch("SELECT status, count(*) AS n FROM fleet.runs GROUP BY status")
    counts = {r["status"]: int(r["n"]) for r in rows}
    return {k: v for k, v in counts.items() if k != "running"}, counts.get("running", 0)


async def settle(ports: list[int], within: float = 150.0) -> dict[str, Any]:
    """Scrape the live replicas until their summed run counts equal the state database's.

    The exporter serves a snapshot refreshed every half recent period; between two ticks'
    runs the database stands still long enough for a snapshot to catch up with it.
    """
    state = await asyncpg.connect(dsn_of(f"{PREFIX}_state"))
    began = time.monotonic()
    try:
        while True:
            db, running = await finished_by_status(state)
            dashboard, leaders = await scrape(ports)
            waited = time.monotonic() - began
            if (running == 0 and dashboard == db) or waited > within:
                return {
                    "db": db,
                    "dashboard": dashboard,
                    "equal": dashboard == db,
                    "exporters": len(leaders),
                    "waited_s": round(waited, 1),
                }
            await asyncio.sleep(2)
    finally:
        await state.close()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the fleet, run it, kill one replica, and return the figures."""
    now = datetime.now(UTC)
    n_os = round(args.checks * args.os_share)
    os_checks = list(range(0, args.checks, max(1, args.checks // max(1, n_os))))[:n_os]
    pg_checks = [i for i in range(args.checks) if i not in set(os_checks)]
    print(f"building {len(pg_checks)} PostgreSQL and {len(os_checks)} OpenSearch checks ...")
    await make_databases()
    await fill_pg(pg_checks, now)
    await fill_os(os_checks, now)
    work = Path(tempfile.mkdtemp(prefix="dg-fleet-"))
    config = work / "fleet.yml"
    config.write_text(config_text(pg_checks, os_checks, args.every))
    ports = [18900 + i for i in range(args.replicas)]
    procs = [start(config, p, work / f"replica-{i}.log") for i, p in enumerate(ports)]
    admin = await asyncpg.connect(PG)
    began = datetime.now(UTC)
    peak = [0.0] * len(procs)
    conns_seen: list[int] = []
    xacts0 = None
    killed_at: datetime | None = None
    killed_mono, victim, was_exporter = 0.0, -1, False
    failover_s: float | None = None
    end = time.monotonic() + args.minutes * 60
    kill_at = time.monotonic() + args.kill_at * 60
    try:
        while time.monotonic() < end:
            await asyncio.sleep(5)
            for i, p in enumerate(procs):
                peak[i] = max(peak[i], rss_mb(p.pid))
            xacts, conns = await state_load(admin)
            if xacts0 is None:
                xacts0, t_xacts0 = xacts, time.monotonic()
            conns_seen.append(conns)
            if killed_at is None and time.monotonic() >= kill_at and args.replicas > 1:
                # The exporter is the replica whose loss asks the most of the others.
                _, leaders = await scrape(ports)
                victim = ports.index(leaders[0]) if leaders else len(procs) - 1
                procs[victim].send_signal(signal.SIGKILL)
                killed_at, killed_mono = datetime.now(UTC), time.monotonic()
                was_exporter = bool(leaders)
                print(f"killed replica {victim} (exporter: {was_exporter}) at {killed_at:%H:%M:%S}")
            if killed_at is not None and failover_s is None:
                alive_ports = [p for i, p in enumerate(ports) if procs[i].poll() is None]
                if (await scrape(alive_ports))[1]:
                    failover_s = time.monotonic() - killed_mono
            left = int(end - time.monotonic())
            print(f"\r{left:4d}s left, state connections {conns}", end="", flush=True)
        print()
        xacts_end, _ = await state_load(admin)
        minutes = (time.monotonic() - t_xacts0) / 60
        alive = [p for i, p in enumerate(ports) if procs[i].poll() is None]
        print("waiting for the exporter's snapshot to catch up with the state database ...")
        counted = await settle(alive)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    state = await asyncpg.connect(dsn_of(f"{PREFIX}_state"))
    try:
        runs = await state.fetch(
            "SELECT check_name, scheduled_for, started_at, status, replica FROM fleet.runs"
            " WHERE trigger = 'recent' AND scheduled_for IS NOT NULL"
        )
        by_status = {
            r["status"]: r["n"]
            for r in await state.fetch(
                "SELECT status, count(*) AS n FROM fleet.runs GROUP BY status"
            )
        }
        table_mb = await state.fetchval("SELECT pg_database_size(current_database())") / 2**20
        # The schema's tables and indexes over its runs: what retention keeps per run.
        schema_bytes = await state.fetchval(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'fleet' AND c.relkind = 'r'"
        )
        bytes_per_run = int(schema_bytes) / max(1, sum(by_status.values()))
    finally:
        await state.close()
        await admin.close()
    every = timedelta(seconds=parse_seconds(args.every))
    # Ticks due while the fleet ran, leaving the first period for start-up (the first
    # tick a replica sees after start may lie before it was ready) and the last one for
    # runs still under way when it stopped.
    first = ceil_to(began + every, every)
    last = ceil_to(datetime.now(UTC) - 2 * every, every)
    due = []
    t = first
    while t <= last:
        due.append(t)
        t += every
    names = [f"c{i:03d}" for i in range(args.checks)]
    seen: dict[tuple[str, datetime], int] = {}
    for r in runs:
        key = (r["check_name"], r["scheduled_for"])
        seen[key] = seen.get(key, 0) + 1
    expected = [(n, t) for n in names for t in due]
    missed = [k for k in expected if k not in seen]
    twice = [k for k, v in seen.items() if v > 1]
    after_kill = [k for k in expected if killed_at is not None and k[1] > killed_at]
    missed_after = [k for k in after_kill if k not in seen]
    late = [
        (r["started_at"] - r["scheduled_for"]).total_seconds()
        for r in runs
        if first <= r["scheduled_for"] <= last
    ]
    spread: dict[str, int] = {}
    for r in runs:
        if first <= r["scheduled_for"] <= last:
            spread[r["replica"]] = spread.get(r["replica"], 0) + 1
    return {
        "checks": args.checks,
        "os_checks": len(os_checks),
        "replicas": args.replicas,
        "minutes": args.minutes,
        "every": args.every,
        "ticks_due": len(expected),
        "ticks_missed": len(missed),
        "ticks_twice": len(twice),
        "ticks_due_after_kill": len(after_kill),
        "ticks_missed_after_kill": len(missed_after),
        "missed_sample": [f"{n}@{t:%H:%M}" for n, t in missed[:5]],
        "lateness_p50_s": percentile(late, 0.5),
        "lateness_p99_s": percentile(late, 0.99),
        "lateness_max_s": max(late) if late else float("nan"),
        "spread": dict(sorted(spread.items())),
        "state_xacts_per_min": (xacts_end - (xacts0 or 0)) / minutes,
        "state_connections_max": max(conns_seen) if conns_seen else 0,
        "state_connections_median": statistics.median(conns_seen) if conns_seen else 0,
        "state_db_mb": table_mb,
        "state_bytes_per_run": round(bytes_per_run),
        "peak_rss_mb": [round(x, 1) for x in peak],
        "runs_by_status_db": by_status,
        "runs_by_status_dashboard_sum": counted["dashboard"],
        "runs_by_status_db_at_scrape": counted["db"],
        "dashboard_equals_db": counted["equal"],
        "exporters_after": counted["exporters"],
        "killed_replica": victim,
        "killed_was_exporter": was_exporter,
        "exporter_failover_s": None if failover_s is None else round(failover_s, 1),
        "logs": str(work),
    }


def parse_seconds(text: str) -> int:
    """Return the seconds of a duration like 1m, 30s or 2h."""
    unit = {"s": 1, "m": 60, "h": 3600}[text[-1]]
    return int(text[:-1]) * unit


def ceil_to(moment: datetime, step: timedelta) -> datetime:
    """Return the first multiple of `step` since the epoch at or after `moment`."""
    secs = step.total_seconds()
    stamp = moment.timestamp()
    return datetime.fromtimestamp(-(-stamp // secs) * secs, UTC)


def section(r: dict[str, Any]) -> str:
    """Return the RESULTS.md section for one fleet run."""
    spread = ", ".join(f"{n}" for n in r["spread"].values())
    rows = [
        ("scheduled ticks due", r["ticks_due"]),
        (
            "ran exactly once",
            f"{r['ticks_due'] - r['ticks_missed']} (missed {r['ticks_missed']},"
            f" twice {r['ticks_twice']})",
        ),
        (
            "due after the kill / missed",
            f"{r['ticks_due_after_kill']} / {r['ticks_missed_after_kill']}",
        ),
        ("runs per replica", spread),
        (
            "replica killed / exporter lock taken over by a survivor in",
            f"{r['killed_replica']} (the exporter: {r['killed_was_exporter']})"
            f" / {r['exporter_failover_s']} s",
        ),
        (
            "tick lateness p50 / p99 / max",
            f"{r['lateness_p50_s']:.1f} s / {r['lateness_p99_s']:.1f} s"
            f" / {r['lateness_max_s']:.1f} s",
        ),
        ("state database transactions per minute", f"{r['state_xacts_per_min']:.0f}"),
        (
            "state database connections (median / max, all replicas)",
            f"{r['state_connections_median']:.0f} / {r['state_connections_max']}",
        ),
        (
            "state database size after the run / tables per stored run",
            f"{r['state_db_mb']:.1f} MB / {r['state_bytes_per_run'] / 1024:.2f} KiB",
        ),
        ("peak RSS per replica", ", ".join(f"{x:.0f} MB" for x in r["peak_rss_mb"])),
        ("runs by status, state database, at the last scrape", r["runs_by_status_db_at_scrape"]),
        (
            "runs by status, summed over the live replicas' /metrics",
            f"{r['runs_by_status_dashboard_sum']} (equal: {r['dashboard_equals_db']},"
            f" exporters: {r['exporters_after']})",
        ),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return f"""## Fleet

`make bench-fleet` ({datetime.now(UTC):%Y-%m-%d}, 2 cores shared with the local stack):
{r["checks"]} checks ({r["checks"] - r["os_checks"]} PostgreSQL->PostgreSQL, {r["os_checks"]}
PostgreSQL->OpenSearch, one table or index each, one in {DRIFTED_EVERY} with planted drift),
recent every {r["every"]}, {r["replicas"]} real `driftgauge serve` replicas on one state
database for {r["minutes"]} real minutes, the exporter killed with SIGKILL half way.

| figure | value |
|---|---|
{table}

Every scheduled tick due while the fleet ran (the first and last periods left out for
start-up and shutdown) has exactly one run, the {r["ticks_due_after_kill"]} due after the
kill included: the survivors took the killed replica's share from the next tick (a run in
flight on it ends `interrupted` once its lease expires), and a survivor held the exporter
lock within {r["exporter_failover_s"]} s of the kill (polled every 5 s). The runs summed
over the live replicas' /metrics, as the dashboard sums them, equal the state database's at
the last scrape: one replica exports the stored series. Lateness is the queue of
{r["checks"]} checks due at the same second behind `state.max_concurrent_runs: 16` per
replica on 2 shared cores. docs/deploy.md ("How much one state database carries") turns
these into sizes.
"""


def main() -> None:
    """Run the fleet bench and print (or write) its figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checks", type=int, default=500)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--kill-at", type=float, default=None, help="minutes (default: half way)")
    ap.add_argument("--every", default="1m")
    ap.add_argument("--os-share", type=float, default=0.1)
    ap.add_argument("--write", action="store_true", help="write bench/RESULTS.md's Fleet section")
    args = ap.parse_args()
    if args.kill_at is None:
        args.kill_at = args.minutes / 2
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2, default=str))
    (ROOT / "bench" / "fleet.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    if args.write:
        results = ROOT / "bench" / "RESULTS.md"
        text = results.read_text()
        new = section(result)
        if "\n## Fleet\n" in text:
            head, _, rest = text.partition("\n## Fleet\n")
            tail = rest.split("\n## ", 1)
            text = head + "\n" + new + ("\n## " + tail[1] if len(tail) > 1 else "")
        else:
            text = text.rstrip() + "\n\n" + new
        results.write_text(text)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
