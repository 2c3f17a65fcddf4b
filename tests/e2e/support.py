"""Shared pieces of the end-to-end tests: start `driftgauge serve`, poll it, scrape it."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
from opensearchpy import AsyncOpenSearch
from prometheus_client.parser import text_string_to_metric_families
from tools.local_stores import address

ROOT = Path(__file__).resolve().parents[2]
PG = address("DRIFTGAUGE_TEST_PG_DSN")
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
T = TypeVar("T")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
MODULE_ROOM = timedelta(minutes=5)
"""Time a module needs before midnight UTC: the longest takes about a minute."""
AFTER_MIDNIGHT = timedelta(minutes=2)
"""Time after midnight UTC before yesterday is settled and due: the modules use 1m for both."""


def midnight_wait(now: datetime) -> float:
    """Return the seconds to wait so that a module starting at `now` (UTC) stays clear of 00:00."""
    today = datetime(now.year, now.month, now.day, tzinfo=now.tzinfo)
    if now - today < AFTER_MIDNIGHT:
        return (today + AFTER_MIDNIGHT - now).total_seconds()
    tomorrow = today + timedelta(days=1)
    if tomorrow - now < MODULE_ROOM:
        return (tomorrow + AFTER_MIDNIGHT - now).total_seconds()
    return 0.0


def past_days(n: int) -> list[date]:
    """Return the `n` days before today (UTC), oldest first."""
    today = datetime.now(UTC).date()
    return [today - timedelta(days=d) for d in range(n, 0, -1)]


def midnight(day: date) -> datetime:
    """Return the start of `day` in UTC."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def day_window(day: date) -> dict[str, str]:
    """Return the run window of one day bucket, as the ledger API takes it."""
    start = midnight(day)
    return {
        "window_start": start.isoformat(),
        "window_end": (start + timedelta(days=1)).isoformat(),
    }


def per_day(
    days: Sequence[date], n: int, row: Callable[[date, datetime, int], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Return `row(day, its midnight, i)` for the first `n` i on each of `days`."""
    return [row(day, midnight(day), i) for day in days for i in range(n)]


def as_doc(row: dict[str, Any]) -> dict[str, Any]:
    """Return a source row as the reader's document: its time as ISO text."""
    return {**row, "completed_at": row["completed_at"].isoformat()}


async def until(what: str, probe: Callable[[], Awaitable[T | None]], limit: float = 90.0) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `limit`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        got = await probe()
        if got:
            return got
        if loop.time() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.25)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_replica(config: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start `driftgauge serve` on 127.0.0.1:`port`, its output going to `log`."""
    exe = ROOT / ".venv" / "bin" / "driftgauge"
    cmd = [str(exe), "serve"] if exe.exists() else [sys.executable, "-m", "driftgauge.server"]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*cmd, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )


def stop(proc: subprocess.Popen[bytes]) -> int:
    """Stop a child with SIGTERM (SIGKILL if it lingers) and return its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    return proc.returncode


async def wait_ready(
    http: httpx.AsyncClient, url: str, proc: subprocess.Popen[bytes], log: Path, limit: float = 60.0
) -> None:
    """Wait until `url`/readyz answers 200; fail pointing at `log` if the process exits."""

    async def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited, see {log}")
        try:
            return (await http.get(f"{url}/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    await until(f"{url}/readyz", ready, limit=limit)


def samples(text: str) -> Samples:
    """Return every sample of an exposition by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


async def scrape(http: httpx.AsyncClient, url: str) -> Samples:
    """Return the samples of `url`/metrics."""
    resp = await http.get(f"{url}/metrics")
    assert resp.status_code == 200
    return samples(resp.text)


def sample(s: Samples, name: str, **labels: str) -> float | None:
    """Return one sample's value by name and labels, or None if it is absent."""
    return s.get((name, tuple(sorted(labels.items()))))


@asynccontextmanager
async def scratch_database(prefix: str) -> AsyncIterator[str]:
    """Yield the DSN of a fresh, uniquely named database; drop it afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(PG, timeout=10)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"', timeout=30)
        yield PG.rsplit("/", 1)[0] + "/" + name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', timeout=30)
        await admin.close()


def dump_log(log: Path, lines: int = 40) -> str:
    """Return the last lines of a child's log, for a failure message."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {log})"
    return "\n".join(text.splitlines()[-lines:])


def config_text(template: str, **values: Any) -> str:
    """Fill `<NAME>` placeholders of a YAML template."""
    for name, value in values.items():
        template = template.replace(f"<{name}>", str(value))
    return template


def serve_config(schema: str, checks: str, stores: Sequence[str] = ()) -> str:
    """Return a serve config template: the source and reader stores (and `stores`), state in
    the source database under `schema`, one token with public reads, then the `checks:` lines."""
    return "\n".join(
        [
            "",
            "stores:",
            '  pg: {kind: postgres, dsn: "<DSN>", timeout_seconds: 10, pool_max: 2}',
            '  os: {kind: opensearch, url: "<OS>", timeout_seconds: 10}',
            *(f"  {line}" for line in stores),
            f'state: {{dsn: "<DSN>", schema: {schema}}}',
            'api: {tokens: ["<TOKEN>"], public_read: true, sample_keys: 20}',
            "checks:",
            checks,
        ]
    )


def task_check(name: str, *more: str, index: str = "<INDEX>") -> str:
    """Return check `name`'s lines: the tasks table against reader `index` on the label field,
    settled after a minute, then the `more` lines (schedule, tolerance...)."""
    lines = [
        "source: {store: pg, table: tasks, key: task_id, time: completed_at}",
        f"reader: {{store: os, index: {index}, key: task_id, time: completed_at}}",
        "fields: {label: string}",
        "settle: 1m",
        *more,
    ]
    return "".join([f"  {name}:\n", *(f"    {line}\n" for line in lines)])


def task_mapping(*keywords: str) -> dict[str, Any]:
    """Return a reader index mapping: the `keywords` fields as keywords, completed_at a date."""
    properties: dict[str, Any] = {k: {"type": "keyword"} for k in keywords}
    return {"properties": {**properties, "completed_at": {"type": "date"}}}


def write_config(tmp: Path, template: str, **values: Any) -> Path:
    """Write `template`, placeholders filled, to `tmp`/driftgauge.yml and return its path."""
    config = tmp / "driftgauge.yml"
    config.write_text(config_text(template, **values), encoding="utf-8")
    return config


@dataclass
class Serving:
    """One running `driftgauge serve` child, ready: where it listens and its process."""

    url: str
    port: int
    proc: subprocess.Popen[bytes]


@asynccontextmanager
async def serving(config: Path, log: Path) -> AsyncIterator[Serving]:
    """Start `driftgauge serve` on a free port, yield it once ready, stop it afterwards."""
    port = free_port()
    proc = start_replica(config, port, log)
    try:
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=10) as http:
            await wait_ready(http, url, proc, log)
        yield Serving(url, port, proc)
    finally:
        stop(proc)


@asynccontextmanager
async def scratch_index(prefix: str) -> AsyncIterator[tuple[AsyncOpenSearch, str]]:
    """Yield an OpenSearch client and a unique index name; delete the index, close the client."""
    index = f"{prefix}_{uuid.uuid4().hex[:10]}"
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=30)
    try:
        yield client, index
    finally:
        await client.indices.delete(index=index, ignore_unavailable=True)
        await client.close()


TASK_COLUMNS = ("task_id", "label", "completed_at")


async def load_tasks(
    dsn: str, records: Sequence[tuple[Any, ...]], columns: Sequence[str] = TASK_COLUMNS
) -> None:
    """Create the source's tasks table (text columns, a timestamptz time) and copy `records` in."""

    def column(name: str) -> str:
        if name == "task_id":
            return "task_id text PRIMARY KEY"
        return "completed_at timestamptz NOT NULL" if name == "completed_at" else f"{name} text"

    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(f"CREATE TABLE tasks ({', '.join(column(c) for c in columns)})")
        await conn.copy_records_to_table("tasks", records=records, columns=list(columns))
    finally:
        await conn.close()
