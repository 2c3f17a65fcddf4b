"""`make demo-backfill`: night 15 repaired through driftgauge, step by step (seed 004).

An orders table (the source) feeds an hourly fact table through a partition step that
converts each amount to the base currency. On night 15 one batch (hours 05 to 10) arrived
with its currency as quoted text; the step found no rate and kept the raw amount. The
settlement report read the night at 07:00 and its duty lead signed 1,284,310.55. driftgauge
finds the six bad hours, plans the backfill, announces it to the three consumers with the
totals before, refuses to start early, lets the fixed step recompute (twice: it converges),
verifies, replays the consumers in rank order and files the log row; the rebuilt report says
1,271,902.10. Everything runs on a fresh database that is dropped at the end.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tools/
from tools.local_stores import address

from driftgauge.app.service import create_app
from driftgauge.configfile.loader import load_text
from driftgauge.ledger.client import LedgerClient
from driftgauge.repair.client import RepairClient

PG_DSN = address("DRIFTGAUGE_TEST_PG_DSN")
TOKEN = "demo-backfill-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SIGNED = Decimal("1284310.55")
CORRECT = Decimal("1271902.10")
RATES = {"EUR": Decimal("1"), "USD": Decimal("0.92"), "SEK": Decimal("0.0875")}
BAD = range(5, 11)
CENT = Decimal("0.01")
CONFIG = """
stores:
  pg: {{kind: postgres, dsn: "{dsn}"}}
state: {{dsn: "{dsn}", schema: driftgauge}}
api: {{tokens: ["{token}"]}}
checks:
  orders:
    description: Hourly fact table of orders in the base currency.
    source: {{store: pg, table: orders_expected, key: id, time: created_at}}
    reader: {{store: pg, table: orders_fact, key: id, time: created_at}}
    key_type: integer
    fields: {{amount_base: decimal}}
    measures: [amount_base]
    settle: 2h
    drilldown: {{leaf_rows: 50}}
    ledger: {{job: orders-step, settle: 0s}}
"""
# The source of truth: every order converted with its (unquoted) currency's rate.
EXPECTED = """
CREATE VIEW orders_expected AS SELECT o.id, round(o.amount * r.rate, 2) AS amount_base,
    o.created_at FROM orders o JOIN rates r ON r.currency = btrim(o.currency, '"')"""
# The partition step: delete-then-insert of one hour, in one transaction. The buggy one
# looks the currency up as it arrived and keeps the raw amount when no rate matches.
STEP = """
INSERT INTO orders_fact SELECT o.id, round(o.amount * coalesce(r.rate, 1), 2), o.created_at
FROM orders o LEFT JOIN rates r ON r.currency = {currency}
WHERE o.created_at >= $1 AND o.created_at < $2"""


def say(text: str) -> None:
    """Print one step of the story."""
    print(text, flush=True)


def _night() -> datetime:
    now = datetime.now(UTC)
    return datetime(now.year, now.month, now.day, tzinfo=UTC) - timedelta(days=2)


def _orders(night: datetime) -> list[tuple[int, str, Decimal, datetime]]:
    """Return the night's orders, tuned so the totals are the seed's to the cent."""
    rnd = random.Random(15)
    rows: list[tuple[int, str, Decimal, datetime]] = []
    for i in range(1, 961):
        hour = (i - 1) // 40
        currency = rnd.choice(["EUR", "EUR", "USD", "SEK"])
        amount = Decimal(rnd.randint(20_000, 220_000)) / 100
        if currency == "SEK":
            amount *= 10
        quoted = f'"{currency}"' if hour in BAD and currency != "EUR" else currency
        rows.append((i, quoted, amount, night + timedelta(hours=hour, seconds=90 * (i % 40))))

    def base(cur: str, amount: Decimal) -> Decimal:
        # Half away from zero, as PostgreSQL's round() of a numeric.
        return (amount * RATES[cur.strip('"')]).quantize(CENT, ROUND_HALF_UP)

    def raw(cur: str, amount: Decimal) -> Decimal:
        return amount if cur.startswith('"') else base(cur, amount)

    # One SEK order of a bad hour sets the overstatement; one EUR order the correct total.
    excess = (
        SIGNED - CORRECT - sum((raw(c, a) - base(c, a) for _, c, a, _ in rows[:-2]), Decimal(0))
    )
    amount = (excess / (1 - RATES["SEK"])).quantize(CENT)
    while amount - base("SEK", amount) != excess:
        amount += CENT if amount - base("SEK", amount) < excess else -CENT
    rows[-2] = (rows[-2][0], '"SEK"', amount, night + timedelta(hours=BAD[0], minutes=30))
    rest = sum((base(c, a) for _, c, a, _ in rows[:-1]), Decimal(0))
    rows[-1] = (rows[-1][0], "EUR", CORRECT - rest, night + timedelta(hours=23, minutes=59))
    return rows


async def _step(conn: asyncpg.Connection, lo: datetime, hi: datetime, *, fixed: bool) -> int:
    currency = "btrim(o.currency, '\"')" if fixed else "o.currency"
    async with conn.transaction():
        await conn.execute(
            "DELETE FROM orders_fact WHERE created_at >= $1 AND created_at < $2", lo, hi
        )
        done = await conn.execute(STEP.format(currency=currency), lo, hi)
    return int(done.split()[-1])


async def _report_total(dsn: str, night: datetime) -> Decimal:
    conn = await asyncpg.connect(dsn)
    try:
        total: Decimal = await conn.fetchval(
            "SELECT sum(amount_base) FROM orders_fact WHERE created_at >= $1 AND created_at < $2",
            night,
            night + timedelta(days=1),
        )
    finally:
        await conn.close()
    return total


@contextmanager
def _consumers_endpoint(dsn: str, night: datetime) -> Iterator[str]:
    """Serve the three consumers' webhooks; the report rebuilds its total on replay."""

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            name = self.path.strip("/")
            if body["event"] == "backfill_announced" and name == "settlement-report":
                say(
                    "    announcement received by the consumers:\n      "
                    + body["announcement"].replace("\n", "\n      ")
                )
            elif body["event"] == "backfill_replay":
                line = f"    replay: {name} rebuilt"
                if name == "settlement-report":
                    line += f"; its total is now {asyncio.run(_report_total(dsn, night)):,}"
                say(line)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post(f"/api/v1{path}", json=body, headers=AUTH)
    out: dict[str, Any] = resp.json()
    if resp.status_code >= 400:
        detail = out["detail"]
        say(f"    refused ({resp.status_code} {detail['rule']}): {detail['detail']}")
    return out


async def _reconcile(client: httpx.AsyncClient) -> dict[str, Any]:
    url = (await _post(client, "/checks/orders/runs", {}))["run"]
    while True:
        run: dict[str, Any] = (await client.get(url)).json()
        if run["status"] != "running":
            return run
        await asyncio.sleep(0.1)


async def demo(dsn: str) -> None:
    """Run night 15 from the corrupt batch to the filed backfill log row."""
    night = _night()
    conn = await asyncpg.connect(dsn)
    await conn.execute("CREATE TABLE rates (currency text PRIMARY KEY, rate numeric)")
    await conn.executemany("INSERT INTO rates VALUES ($1, $2)", list(RATES.items()))
    await conn.execute(
        "CREATE TABLE orders (id bigint PRIMARY KEY, currency text,"
        " amount numeric, created_at timestamptz)"
    )
    await conn.copy_records_to_table("orders", records=_orders(night))
    await conn.execute(EXPECTED)
    await conn.execute(
        "CREATE TABLE orders_fact (id bigint, amount_base numeric, created_at timestamptz)"
    )
    for h in range(24):
        await _step(conn, night + timedelta(hours=h), night + timedelta(hours=h + 1), fixed=False)
    say(
        f"night 15 = {night:%Y-%m-%d}: the step wrote 24 hourly partitions; hours 05-10 came"
        " with their currency as quoted text"
    )
    app = create_app(load_text(CONFIG.format(dsn=dsn, token=TOKEN)), start_scheduler=False)
    with _consumers_endpoint(dsn, night) as hooks:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://driftgauge", timeout=60
            ) as client,
        ):
            transport = httpx.ASGITransport(app=app)
            async with RepairClient(
                "http://driftgauge", token=TOKEN, transport=transport
            ) as repair:
                await repair.advance(
                    "orders-fact",
                    night + timedelta(hours=23),
                    by="scheduler",
                    reason="nightly run",
                    check="orders",
                )
                for name, kind, owner, rank, signer in (
                    ("settlement-report", "report", "finance", 1, "settlement duty lead"),
                    ("payout-export", "export", "payments", 2, None),
                    ("demand-forecast", "model", "data science", 2, None),
                ):
                    await repair.put_consumer(
                        name,
                        kind=kind,
                        owner=owner,
                        rank=rank,
                        webhook_url=f"{hooks}/{name}",
                        signs=signer is not None,
                        signed_by=signer,
                    )
                    await repair.record_read(
                        name,
                        "orders",
                        [
                            (night + timedelta(hours=h), night + timedelta(hours=h + 1))
                            for h in range(24)
                        ],
                    )
            signed = await _report_total(dsn, night)
            say(f"07:00 the settlement duty lead signs the report's total: {signed:,}")

            run = await _reconcile(client)
            say(f"driftgauge reconciles the check: run {run['id']} is {run['status']}")
            plan = await _post(
                client,
                "/backfills",
                {
                    "check": "orders",
                    "by": "on-call",
                    "reason": "currency parsed as text",
                    "pipeline": "orders-fact",
                },
            )
            bf = plan["id"]
            say(
                f"1. plan: backfill {bf}, {len(plan['targets'])} bad hours "
                f"({', '.join(t['start'][11:16] for t in plan['targets'])}); first bad "
                f"{plan['first_bad'][11:16]}, watermark reset point {plan['reset_to'][11:16]};"
                f" consumers in rank order: "
                + ", ".join(f"{c['name']} (rank {c['rank']})" for c in plan["consumers"])
            )
            say("   start before announcing:")
            await _post(client, f"/backfills/{bf}/start", {"by": "on-call"})
            announced = await _post(client, f"/backfills/{bf}/announce", {"by": "on-call"})
            say(f"2. announce at {announced['announced_at']}: before {announced['totals_before']}")
            started = await _post(client, f"/backfills/{bf}/start", {"by": "on-call"})
            say(
                f"3. start: {started['status']}; watermark moved back to "
                f"{started['reset_to'][11:16]}"
            )
            lo, hi = night + timedelta(hours=BAD[0]), night + timedelta(hours=BAD[-1] + 1)
            handed = await conn.fetchval(
                "SELECT count(*) FROM orders WHERE created_at >= $1 AND created_at < $2", lo, hi
            )
            counts = []
            for _ in range(2):  # run twice: the delete-then-insert converges
                async with LedgerClient(
                    "http://driftgauge",
                    job="orders-step",
                    window_start=lo,
                    window_end=hi,
                    input_rows=handed,
                    token=TOKEN,
                    backfill_id=bf,
                    transport=transport,
                ) as ledger:
                    n = 0
                    for h in BAD:
                        n += await _step(
                            conn,
                            night + timedelta(hours=h),
                            night + timedelta(hours=h + 1),
                            fixed=True,
                        )
                    await ledger.count("written", n)
                counts.append(
                    await conn.fetchval(
                        "SELECT count(*) FROM orders_fact WHERE created_at >= $1"
                        " AND created_at < $2",
                        lo,
                        hi,
                    )
                )
            say(
                f"4. recompute with the fixed parsing, twice: {counts[0]} rows, then "
                f"{counts[1]} rows (reported to the ledger under backfill {bf})"
            )
            verified = await _post(client, f"/backfills/{bf}/verify", {"by": "on-call"})
            say(f"5. verify: {verified['status']}, every target matches its source")
            say("   replay the payout export first:")
            await _post(
                client, f"/backfills/{bf}/replay", {"by": "on-call", "consumer": "payout-export"}
            )
            say("6. replay in rank order:")
            await _post(client, f"/backfills/{bf}/replay", {"by": "on-call"})
            closed = await _post(client, f"/backfills/{bf}/close", {"by": "on-call"})
            after = await _report_total(dsn, night)
            say(
                f"7. close: the backfill log row of backfill {bf}: "
                f"{len(closed['targets'])} partitions, before {closed['totals_before']}, "
                f"after {closed['totals_after']}, announced at {closed['announced_at']}, "
                f"ran at {closed['started_at']} by {closed['started_by']}"
            )
            say(f"   signed total {signed:,}, recomputed total {after:,}, diff {after - signed:,}")
    await conn.close()


async def main() -> None:
    """Create a scratch database, run the demo, drop the database."""
    logging.getLogger("driftgauge").setLevel(logging.ERROR)  # the story is printed instead
    name = f"dg_demo_backfill_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(PG_DSN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        await demo(PG_DSN.rsplit("/", 1)[0] + "/" + name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
