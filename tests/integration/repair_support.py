"""Builders for the repair tests: orders and an hourly fact table, a webhook receiver, an app."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI

from driftgauge.app.service import create_app
from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text

TOKEN = "repair-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROWS_PER_HOUR = 10
CONFIG = """
stores:
  pg: {{kind: postgres, dsn: "{dsn}"}}
state: {{dsn: "{dsn}", schema: {schema}}}
api: {{tokens: ["{token}"]}}
checks:
  orders:
    source: {{store: pg, table: {orders}, key: id, time: created_at}}
    reader: {{store: pg, table: {fact}, key: id, time: created_at}}
    key_type: integer
    fields: {{amount_base: decimal}}
    settle: 2h
    drilldown: {{leaf_rows: 20}}
    schedule: {{recent: {{every: 1h, days: 3}}}}
    ledger: {{job: orders-step, settle: 0s}}
"""


def day_zero() -> datetime:
    """Return the UTC midnight two days ago: every hour of it is closed."""
    now = datetime.now(UTC)
    return datetime(now.year, now.month, now.day, tzinfo=UTC) - timedelta(days=2)


def order_rows(day: datetime, hours: range = range(24)) -> list[tuple[int, Decimal, datetime]]:
    """Return ROWS_PER_HOUR orders per hour: (id, amount_base, created_at)."""
    return [
        (h * 100 + i, Decimal(f"{10 + i}.{h:02d}"), day + timedelta(hours=h, minutes=5 * i))
        for h in hours
        for i in range(ROWS_PER_HOUR)
    ]


@dataclass
class Tables:
    """One test's source, fact table and state schema in the shared test database."""

    dsn: str
    orders: str = field(default_factory=lambda: f"orders_{uuid.uuid4().hex[:8]}")
    fact: str = field(default_factory=lambda: f"fact_{uuid.uuid4().hex[:8]}")
    schema: str = field(default_factory=lambda: f"dg_{uuid.uuid4().hex[:10]}")

    def config_text(self) -> str:
        """Return the config file's text: the orders check over these tables."""
        return CONFIG.format(
            dsn=self.dsn, schema=self.schema, token=TOKEN, orders=self.orders, fact=self.fact
        )

    def config(self) -> Config:
        """Return the config of the orders check over these tables."""
        return load_text(self.config_text())

    async def create(self, rows: list[tuple[int, Decimal, datetime]]) -> None:
        """Create both tables holding `rows` (the fact table a faithful copy)."""
        conn = await asyncpg.connect(self.dsn)
        try:
            for table in (self.orders, self.fact):
                await conn.execute(
                    f"CREATE TABLE {table} (id bigint, amount_base numeric, created_at timestamptz)"
                )
                await conn.copy_records_to_table(table, records=rows)
        finally:
            await conn.close()

    async def sql(self, text: str, *args: Any) -> Any:
        """Run one statement on the test database; return its status."""
        conn = await asyncpg.connect(self.dsn)
        try:
            return await conn.execute(text.format(orders=self.orders, fact=self.fact), *args)
        finally:
            await conn.close()

    async def corrupt(self, lo: datetime, hi: datetime) -> None:
        """Parse the currency as text in [lo, hi): amount_base 100 times too big."""
        await self.sql(
            "UPDATE {fact} SET amount_base = amount_base * 100"
            " WHERE created_at >= $1 AND created_at < $2",
            lo,
            hi,
        )

    async def append(self, lo: datetime, hi: datetime) -> int:
        """The unsafe step: insert the partitions' rows without deleting what is there."""
        done = await self.sql(
            "INSERT INTO {fact} SELECT * FROM {orders} WHERE created_at >= $1 AND created_at < $2",
            lo,
            hi,
        )
        return int(done.split()[-1])

    async def recompute(self, lo: datetime, hi: datetime) -> int:
        """The idempotent step: delete the partitions' rows, insert them again, one transaction."""
        conn = await asyncpg.connect(self.dsn)
        try:
            async with conn.transaction():
                await conn.execute(
                    f"DELETE FROM {self.fact} WHERE created_at >= $1 AND created_at < $2", lo, hi
                )
                done = await conn.execute(
                    f"INSERT INTO {self.fact} SELECT * FROM {self.orders}"
                    " WHERE created_at >= $1 AND created_at < $2",
                    lo,
                    hi,
                )
        finally:
            await conn.close()
        return int(done.split()[-1])


class Receiver:
    """A small HTTP server that records every JSON body posted to it, in arrival order."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.fail: set[str] = set()
        received = self.posts
        failing = self.fail

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.append((self.path, body))
                code = 503 if self.path in failing else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def paths(self, event: str) -> list[str]:
        """Return the paths that got a post of `event`, in order."""
        return [p for p, body in self.posts if body.get("event") == event]


@contextmanager
def receiver() -> Iterator[Receiver]:
    """Run a Receiver in a thread for the block."""
    r = Receiver()
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()
        thread.join(5)


@asynccontextmanager
async def serve(config: Config) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Run the app (no scheduler) and yield it with a client."""
    app = create_app(config, start_scheduler=False, refresh_every=3600)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://driftgauge", timeout=60
        ) as client,
    ):
        yield app, client


async def reconcile(client: httpx.AsyncClient) -> dict[str, Any]:
    """Run the orders check now and return the finished run."""
    resp = await client.post("/api/v1/checks/orders/runs", headers=AUTH)
    assert resp.status_code == 202, resp.text
    url = resp.json()["run"]
    for _ in range(600):
        run: dict[str, Any] = (await client.get(url)).json()
        if run["status"] != "running":
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {url} did not finish")


async def post(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], expect: int = 200
) -> dict[str, Any]:
    """POST to the API with the token and check the status code."""
    resp = await client.post(f"/api/v1{path}", json=body, headers=AUTH)
    assert resp.status_code == expect, resp.text
    out: dict[str, Any] = resp.json()
    return out
