"""Benchmark the drill-down API under concurrent load: p50/p99 latency and requests/s.

Plants drift on a fresh PostgreSQL source and OpenSearch reader, starts `driftgauge serve`,
records one run, then loads the drill-down endpoints from a second process (an httpx async
client, loopback only, bounded by a request count and a time limit).

    .venv/bin/python bench/api_load.py [--days 7] [--rows-per-day 2000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import socket
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address

ROOT = Path(__file__).resolve().parents[1]
PG = address("DRIFTGAUGE_TEST_PG_DSN")
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
CONFIG = """
stores:
  pg: {{kind: postgres, dsn: "{dsn}", timeout_seconds: 60}}
  os: {{kind: opensearch, url: "{os}", timeout_seconds: 60}}
state: {{dsn: "{dsn}", schema: driftgauge_bench}}
api: {{tokens: ["{token}"], public_read: true, sample_keys: 200}}
checks:
  tasks:
    source: {{store: pg, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: os, index: {index}, key: task_id, time: completed_at}}
    fields: {{label: string}}
    settle: 1m
    drilldown: {{leaf_rows: 200}}
    schedule: {{recent: {{every: 1d, days: {days}}}}}
"""


# ---------------------------------------------------------------- load client (2nd process)


def percentile(values: list[float], q: float) -> float:
    """Return the q-quantile (0..1) of values by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def load(
    base: str,
    token: str,
    paths: list[tuple[str, str, bool]],
    requests: int,
    concurrency: int,
    seconds: float,
) -> dict[str, Any]:
    """Send `requests` GETs (at most `seconds`) with `concurrency` in flight; return stats."""
    host = urlsplit(base).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"--client: {base} is not a loopback address")
    rng = random.Random(7)
    plan = [rng.choice(paths) for _ in range(requests)]
    lat: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    queue: asyncio.Queue[tuple[str, str, bool]] = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)
    deadline = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(client: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            try:
                kind, path, auth = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            t0 = time.perf_counter()
            resp = await client.get(path, headers=headers if auth else None)
            took = time.perf_counter() - t0
            if resp.status_code != 200:
                errors[kind] = errors.get(kind, 0) + 1
            lat.setdefault(kind, []).append(took)

    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        wall = time.perf_counter() - started
    every = [x for xs in lat.values() for x in xs]
    out: dict[str, Any] = {
        "requests": len(every),
        "seconds": round(wall, 2),
        "requests_per_second": round(len(every) / wall, 1),
        "p50_ms": round(percentile(every, 0.5) * 1000, 1),
        "p99_ms": round(percentile(every, 0.99) * 1000, 1),
        "errors": errors,
        "endpoints": {
            k: {
                "requests": len(v),
                "p50_ms": round(percentile(v, 0.5) * 1000, 1),
                "p99_ms": round(percentile(v, 0.99) * 1000, 1),
            }
            for k, v in sorted(lat.items())
        },
    }
    return out


def client_main(args: argparse.Namespace) -> int:
    """Run the load in this process and print the stats as JSON."""
    paths = [tuple(p) for p in json.loads(Path(args.paths).read_text(encoding="utf-8"))]
    stats = asyncio.run(
        load(
            args.client,
            args.token,
            paths,  # type: ignore[arg-type]
            args.requests,
            args.concurrency,
            args.seconds,
        )
    )
    print(json.dumps(stats))
    return 0


# ---------------------------------------------------------------- setup and server


def free_port() -> int:
    """Return a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def prepare(dsn: str, index: str, days: int, per_day: int) -> list[str]:
    """Load the source table and the index with planted drift; return the day labels."""
    today = datetime.now(UTC).date()
    first = today - timedelta(days=days)
    rows = []
    for d in range(days):
        day = first + timedelta(days=d)
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        for i in range(per_day):
            rows.append(
                (f"t{day:%m%d}-{i:06d}", "ok", start + timedelta(seconds=i * 86399 // per_day))
            )
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        await conn.execute(
            "CREATE TABLE tasks (task_id text PRIMARY KEY, label text,"
            " completed_at timestamptz NOT NULL)"
        )
        await conn.copy_records_to_table(
            "tasks", records=rows, columns=["task_id", "label", "completed_at"]
        )
    finally:
        await conn.close()
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=120)
    try:
        await client.indices.create(
            index=index,
            body={
                "settings": {"number_of_replicas": 0, "refresh_interval": "-1"},
                "mappings": {
                    "properties": {
                        "task_id": {"type": "keyword"},
                        "label": {"type": "keyword"},
                        "completed_at": {"type": "date"},
                    }
                },
            },
        )

        def docs() -> Any:
            for n, (key, label, when) in enumerate(rows):
                if n % 97 == 5:
                    continue  # missing
                changed = "wrong" if n % 211 == 9 else label  # mismatched
                yield {
                    "_index": index,
                    "_id": key,
                    "_source": {"task_id": key, "label": changed, "completed_at": when.isoformat()},
                }
                if n % 389 == 1:  # extra
                    yield {
                        "_index": index,
                        "_id": f"x{key}",
                        "_source": {
                            "task_id": f"x{key}",
                            "label": label,
                            "completed_at": when.isoformat(),
                        },
                    }

        await async_bulk(client, docs(), chunk_size=5000)
        await client.indices.refresh(index=index)
    finally:
        await client.close()
    return [(first + timedelta(days=d)).isoformat() for d in range(days)]


async def drill_paths(base: str, token: str, days: list[str]) -> list[tuple[str, str, bool]]:
    """Return the drill-down requests to replay: days, a day, its hours, its keys."""
    prefix = "/api/v1/checks/tasks"
    paths: list[tuple[str, str, bool]] = [("days", f"{prefix}/days", False)]
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for day in days:
            paths.append(("day", f"{prefix}/days/{day}", False))
            detail = (await client.get(f"{prefix}/days/{day}")).json()
            for h in detail["hours"]:
                hour = datetime.fromisoformat(h["label"]).hour
                paths.append(("hour", f"{prefix}/days/{day}/hours/{hour}", False))
            for offset in (0, 50):
                paths.append(("keys", f"{prefix}/days/{day}/keys?limit=50&offset={offset}", True))
    return paths


async def wait_for_run(base: str, token: str) -> dict[str, Any]:
    """Trigger a run and wait (bounded) for it to finish."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for _ in range(240):
            try:
                if (await client.get("/readyz")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.25)
        resp = await client.post(
            "/api/v1/checks/tasks/runs", headers={"Authorization": f"Bearer {token}"}
        )
        resp.raise_for_status()
        url = resp.json()["run"]
        for _ in range(1200):
            run: dict[str, Any] = (await client.get(url)).json()
            if run["status"] != "running":
                return run
            await asyncio.sleep(0.25)
    raise SystemExit("the run did not finish within 5 minutes")


def main(argv: list[str] | None = None) -> int:
    """Set up, serve, load from a second process, report, tear down."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--rows-per-day", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--seconds", type=float, default=60.0, help="time limit of the load")
    p.add_argument("--client", help=argparse.SUPPRESS)
    p.add_argument("--token", help=argparse.SUPPRESS)
    p.add_argument("--paths", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client:
        return client_main(args)
    return asyncio.run(bench(args))


async def bench(args: argparse.Namespace) -> int:
    """Run the whole benchmark and print one JSON report."""
    suffix = uuid.uuid4().hex[:8]
    db = index = f"dg_bench_api_{suffix}"
    dsn = PG.rsplit("/", 1)[0] + "/" + db
    token = uuid.uuid4().hex
    admin = await asyncpg.connect(PG, timeout=30)
    server: asyncio.subprocess.Process | None = None
    with tempfile.TemporaryDirectory() as tmp, (Path(tmp) / "serve.log").open("wb") as log:
        try:
            await admin.execute(f'CREATE DATABASE "{db}"', timeout=60)
            days = await prepare(dsn, index, args.days, args.rows_per_day)
            cfg = Path(tmp) / "bench.yml"
            cfg.write_text(
                CONFIG.format(dsn=dsn, os=OS_URL, token=token, index=index, days=args.days + 1),
                encoding="utf-8",
            )
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            server = await asyncio.create_subprocess_exec(
                str(ROOT / ".venv" / "bin" / "driftgauge"),
                "serve",
                "--config",
                str(cfg),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                stdout=log,
                stderr=log,
            )
            run = await wait_for_run(base, token)
            paths = await drill_paths(base, token, days)
            plan = Path(tmp) / "paths.json"
            plan.write_text(json.dumps(paths), encoding="utf-8")
            loader = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--client",
                base,
                "--token",
                token,
                "--paths",
                str(plan),
                "--requests",
                str(args.requests),
                "--concurrency",
                str(args.concurrency),
                "--seconds",
                str(args.seconds),
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(loader.communicate(), args.seconds + 60)
            if loader.returncode != 0:
                raise SystemExit(f"the load process failed ({loader.returncode})")
            stats = json.loads(out)
            report = {
                "benchmark": "api_load",
                "days": args.days,
                "rows_per_day": args.rows_per_day,
                "concurrency": args.concurrency,
                "run": {
                    "status": run["status"],
                    "seconds": run["duration_seconds"],
                    "queries": run["queries"],
                },
                "distinct_paths": len(paths),
                **stats,
            }
            print(json.dumps(report, indent=2))
        finally:
            if server is not None and server.returncode is None:
                server.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(server.wait(), 30)
                except TimeoutError:
                    server.kill()
                    await asyncio.wait_for(server.wait(), 10)
            client = AsyncOpenSearch(hosts=[OS_URL], timeout=60)
            await client.indices.delete(index=index, ignore_unavailable=True)
            await client.close()
            await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)', timeout=60)
            await admin.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
