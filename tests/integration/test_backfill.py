"""The backfill lifecycle on real PostgreSQL: plan, announce, start, verify, replay, close."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import httpx
import pytest

from driftgauge.ledger.client import LedgerClient
from driftgauge.repair.client import RepairClient
from tests.integration.repair_support import (
    AUTH,
    ROWS_PER_HOUR,
    TOKEN,
    Tables,
    day_zero,
    order_rows,
    post,
    receiver,
    reconcile,
    serve,
)

pytestmark = pytest.mark.integration


async def _consumers(client: httpx.AsyncClient, url: str) -> None:
    """Night 15's three consumers: the signed report, the export after it, the forecast."""
    rows = [
        ("settlement-report", "report", "finance", 1, True, "settlement duty lead"),
        ("payout-export", "export", "payments", 2, False, None),
        ("demand-forecast", "model", "data science", 2, False, None),
    ]
    for name, kind, owner, rank, signs, signer in rows:
        resp = await client.put(
            f"/api/v1/consumers/{name}",
            headers=AUTH,
            json={
                "kind": kind,
                "owner": owner,
                "rank": rank,
                "webhook_url": f"{url}/{name}",
                "signs": signs,
                "signed_by": signer,
            },
        )
        assert resp.status_code == 200, resp.text


async def test_night_15_backfill_runs_in_the_seed_order(pg_database: str) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    await tables.create(order_rows(day))
    await tables.corrupt(day + timedelta(hours=5), day + timedelta(hours=11))
    with receiver() as hook:
        async with serve(tables.config()) as (app, client):
            transport = httpx.ASGITransport(app=app)
            run = await reconcile(client)
            assert run["status"] == "drift", run
            await _consumers(client, hook.url)
            async with RepairClient(
                "http://driftgauge", token=TOKEN, transport=transport
            ) as repair:
                await repair.advance(
                    "orders-fact",
                    day + timedelta(hours=23),
                    by="scheduler",
                    reason="nightly run",
                    check="orders",
                )
                whole_day = [
                    (day + timedelta(hours=h), day + timedelta(hours=h + 1)) for h in range(24)
                ]
                for name in ("settlement-report", "payout-export", "demand-forecast"):
                    assert await repair.record_read(name, "orders", whole_day) == 24

            # plan: the six drifting hours, the first bad one, the reset point, the readers
            plan = await post(
                client,
                "/backfills",
                {
                    "check": "orders",
                    "by": "ana",
                    "reason": "currency parsed as text",
                    "pipeline": "orders-fact",
                    "since": str(day.date()),
                    "until": str(day.date()),
                },
                201,
            )
            bf = plan["id"]
            assert [t["start"][11:13] for t in plan["targets"]] == [
                f"{h:02d}" for h in range(5, 11)
            ]
            assert plan["first_bad"].startswith((day + timedelta(hours=5)).strftime("%Y-%m-%dT05"))
            assert plan["reset_to"].startswith((day + timedelta(hours=4)).strftime("%Y-%m-%dT04"))
            assert [c["name"] for c in plan["consumers"]] == [
                "settlement-report",
                "demand-forecast",
                "payout-export",
            ]
            assert plan["status"] == "planned"
            twice = await post(
                client, "/backfills", {"check": "orders", "by": "bob", "reason": "same hours"}, 409
            )
            assert twice["detail"]["rule"] == "overlapping_backfill"

            # start before announcing: a signing consumer read the partitions
            refused = await post(client, f"/backfills/{bf}/start", {"by": "ana"}, 409)
            assert refused["detail"]["rule"] == "not_announced"
            assert "settlement duty lead" in refused["detail"]["detail"]

            # announce: before totals captured, the text from the consumers rows, posted
            announced = await post(client, f"/backfills/{bf}/announce", {"by": "ana"})
            assert announced["status"] == "announced" and announced["announced_at"]
            assert announced["totals_before"]["count"] == 6 * ROWS_PER_HOUR
            assert all(t["before"]["count"] == ROWS_PER_HOUR for t in announced["targets"])
            assert "signed by settlement duty lead" in announced["announcement"]
            assert sorted(hook.paths("backfill_announced")) == [
                "/demand-forecast",
                "/payout-export",
                "/settlement-report",
            ]
            again = await post(client, f"/backfills/{bf}/announce", {"by": "ana"}, 409)
            assert again["detail"]["rule"] == "out_of_order"

            # start: allowed now, and it moves the watermark back to the reset point
            started = await post(client, f"/backfills/{bf}/start", {"by": "ana"})
            assert started["status"] == "running"
            async with RepairClient(
                "http://driftgauge", token=TOKEN, transport=transport
            ) as repair:
                mark = await repair.watermark("orders-fact")
            assert mark["processed_through"].startswith(plan["reset_to"][:13])
            assert mark["moves"][0]["direction"] == "back"
            assert mark["moves"][0]["backfill_id"] == bf

            # verify before the recompute: the partitions still differ
            early = await post(client, f"/backfills/{bf}/verify", {"by": "ana"}, 409)
            assert early["detail"]["rule"] == "targets_not_ok"
            assert "6 of 6" in early["detail"]["detail"]

            # the job recomputes, reporting to the ledger under the backfill id
            lo, hi = day + timedelta(hours=5), day + timedelta(hours=11)
            async with LedgerClient(
                "http://driftgauge",
                job="orders-step",
                window_start=lo,
                window_end=hi,
                input_rows=60,
                token=TOKEN,
                backfill_id=bf,
                transport=transport,
            ) as ledger_run:
                written = await tables.recompute(lo, hi)
                await ledger_run.written([str(i) for i in range(written)])
            # The signed partitions changed, but inside an announced backfill: no breach.
            assert (await post(client, "/repair/judge", {}))["silent_changes"] == 0
            shown = (await client.get(f"/api/v1/backfills/{bf}")).json()
            assert shown["ledger_runs"] == [ledger_run.run_id]

            verified = await post(client, f"/backfills/{bf}/verify", {"by": "ana"})
            assert verified["status"] == "verified"
            assert all(t["verified"]["ok"] for t in verified["targets"])

            # replay: the export (rank 2) may not run before the report (rank 1)
            early_replay = await post(
                client, f"/backfills/{bf}/replay", {"by": "ana", "consumer": "payout-export"}, 409
            )
            assert early_replay["detail"]["rule"] == "replay_order"
            assert "settlement-report (rank 1)" in early_replay["detail"]["detail"]
            closing = await post(client, f"/backfills/{bf}/close", {"by": "ana"}, 409)
            assert closing["detail"]["rule"] == "out_of_order"
            replayed = await post(client, f"/backfills/{bf}/replay", {"by": "ana"})
            assert replayed["status"] == "replayed"
            order = hook.paths("backfill_replay")
            assert order[0] == "/settlement-report"
            assert sorted(order[1:]) == ["/demand-forecast", "/payout-export"]

            # close: totals after, the diff, the backfill log row
            closed = await post(client, f"/backfills/{bf}/close", {"by": "ana"})
            assert closed["status"] == "closed" and closed["closed_by"] == "ana"
            assert closed["totals_after"]["count"] == 6 * ROWS_PER_HOUR
            assert closed["diff"] == {"count": 0}
            assert all(t["after"] != t["before"] for t in closed["targets"])
            steps = [
                (e["step"], e["outcome"])
                for e in closed["events"]
                if e["outcome"] in ("done", "refused")
            ]
            assert steps[0] == ("plan", "done") and steps[-1] == ("close", "done")
            assert ("start", "refused") in steps

            # the refusals and the closed backfill reach /metrics
            text = (await client.get("/metrics")).text
            assert (
                'driftgauge_backfill_refusals_total{rule="not_announced",step="start"} 1.0' in text
            )
            assert 'driftgauge_backfills{status="closed"} 1.0' in text
            assert (
                'driftgauge_backfill_refusals_total{rule="overlapping_backfill",step="plan"} 1.0'
            ) in text
            assert 'driftgauge_watermark_age_seconds{pipeline="orders-fact"}' in text

            # the replayed consumers re-read the corrected partitions: no silent change
            judged = await post(client, "/repair/judge", {})
            assert judged["silent_changes"] == 0


async def test_start_is_refused_for_partitions_younger_than_the_settle_window(
    pg_database: str,
) -> None:
    tables = Tables(pg_database)
    # Two days ago, not yesterday: yesterday's last hours are still settling (2h) from
    # 00:00 to 02:00 UTC, and a settling day is never judged drift.
    day = day_zero()
    await tables.create(order_rows(day, range(22, 24)))
    await tables.corrupt(day + timedelta(hours=23), day + timedelta(hours=24))
    config = tables.config()
    async with serve(config) as (_, client):
        run = await reconcile(client)
        assert run["status"] == "drift", run
    # The check's settle window grows to two days: that day's 23:00 hour is open again.
    check = replace(config.checks["orders"], settle=timedelta(days=2))
    async with serve(replace(config, checks={"orders": check})) as (_, client):
        plan = await post(
            client, "/backfills", {"check": "orders", "by": "ana", "reason": "bad amounts"}, 201
        )
        assert len(plan["targets"]) == 1 and plan["consumers"] == []
        refused = await post(client, f"/backfills/{plan['id']}/start", {"by": "ana"}, 409)
        assert refused["detail"]["rule"] == "open_partition"
        assert "settle window" in refused["detail"]["detail"]
        shown = (await client.get(f"/api/v1/backfills/{plan['id']}")).json()
        assert shown["status"] == "planned"
        assert shown["events"][-1]["rule"] == "open_partition"


async def test_an_undelivered_announcement_keeps_the_backfill_planned(pg_database: str) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    await tables.create(order_rows(day, range(3)))
    await tables.corrupt(day + timedelta(hours=1), day + timedelta(hours=2))
    with receiver() as hook:
        async with serve(tables.config()) as (_, client):
            await reconcile(client)
            await _consumers(client, hook.url)
            await post(
                client,
                "/reads",
                {
                    "consumer": "settlement-report",
                    "check": "orders",
                    "partitions": [
                        {
                            "start": (day + timedelta(hours=1)).isoformat(),
                            "end": (day + timedelta(hours=2)).isoformat(),
                        }
                    ],
                },
                201,
            )
            plan = await post(
                client, "/backfills", {"check": "orders", "by": "ana", "reason": "bad hour"}, 201
            )
            assert [c["name"] for c in plan["consumers"]] == ["settlement-report"]
            hook.fail.add("/settlement-report")
            failed = await post(client, f"/backfills/{plan['id']}/announce", {"by": "ana"}, 409)
            assert failed["detail"]["rule"] == "announcement_undelivered"
            assert "HTTP 503" in failed["detail"]["detail"]
            shown = (await client.get(f"/api/v1/backfills/{plan['id']}")).json()
            assert shown["status"] == "planned" and shown["announced_at"] is None
            hook.fail.clear()
            done = await post(client, f"/backfills/{plan['id']}/announce", {"by": "ana"})
            assert done["status"] == "announced"
            assert [e["outcome"] for e in done["events"] if e["step"] == "announce"] == [
                "undelivered",
                "refused",
                "delivered",
                "done",
            ]


async def test_a_command_consumer_is_replayed_once_its_run_is_reported(pg_database: str) -> None:
    tables = Tables(pg_database)
    day = day_zero()
    await tables.create(order_rows(day, range(2)))
    await tables.corrupt(day, day + timedelta(hours=1))
    hour = [{"start": day.isoformat(), "end": (day + timedelta(hours=1)).isoformat()}]
    async with serve(tables.config()) as (_, client):
        await reconcile(client)
        for name, rank in (("ledger-report", 1), ("tax-export", 2)):
            resp = await client.put(
                f"/api/v1/consumers/{name}",
                headers=AUTH,
                json={
                    "kind": "report",
                    "owner": "finance",
                    "rank": rank,
                    "command": f"make {name}",
                },
            )
            assert resp.status_code == 200, resp.text
            await post(
                client, "/reads", {"consumer": name, "check": "orders", "partitions": hour}, 201
            )
        bf = (
            await post(
                client, "/backfills", {"check": "orders", "by": "ana", "reason": "bad hour"}, 201
            )
        )["id"]
        # Nobody signs: start needs no announcement.
        await post(client, f"/backfills/{bf}/start", {"by": "ana"})
        await tables.recompute(day, day + timedelta(hours=1))
        await post(client, f"/backfills/{bf}/verify", {"by": "ana"})
        waiting = await post(client, f"/backfills/{bf}/replay", {"by": "ana"})
        assert waiting["status"] == "verified"
        assert [c["replay"] and c["replay"]["outcome"] for c in waiting["consumers"]] == [
            "running",
            None,
        ]
        assert "waiting: run 'make ledger-report'" in waiting["events"][-1]["detail"]
        early = await post(
            client, f"/backfills/{bf}/replay", {"by": "ana", "consumer": "tax-export"}, 409
        )
        assert early["detail"]["rule"] == "replay_order"
        await post(
            client,
            f"/backfills/{bf}/replays/ledger-report/finished",
            {"by": "ana", "detail": "exit 0"},
        )
        await post(client, f"/backfills/{bf}/replay", {"by": "ana"})
        done = await post(client, f"/backfills/{bf}/replays/tax-export/finished", {"by": "ana"})
        assert done["status"] == "replayed"
        closed = await post(client, f"/backfills/{bf}/close", {"by": "ana"})
        assert closed["status"] == "closed"
        assert closed["announced_at"] is None and closed["totals_before"]["count"] == 10


async def test_bad_input_names_the_field(pg_database: str) -> None:
    tables = Tables(pg_database)
    await tables.create(order_rows(day_zero(), range(1)))
    async with serve(tables.config()) as (_, client):
        resp = await client.put(
            "/api/v1/consumers/x",
            headers=AUTH,
            json={
                "kind": "report",
                "owner": "o",
                "rank": 1,
                "webhook_url": "http://h/x",
                "signs": True,
            },
        )
        assert resp.status_code == 422
        assert resp.json()["detail"][0]["loc"] == ["body", "signed_by"]
        resp = await client.post(
            "/api/v1/reads",
            headers=AUTH,
            json={
                "consumer": "nobody",
                "check": "nope",
                "partitions": [{"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"}],
            },
        )
        assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "check"]
        resp = await client.post(
            "/api/v1/watermarks/p/advance",
            headers=AUTH,
            json={"to": "2026-01-01T00:00:00", "by": "a", "reason": "r"},
        )
        assert resp.status_code == 422 and "time zone" in resp.text
        resp = await client.get("/api/v1/backfills/99999")
        assert resp.status_code == 404
        resp = await client.post("/api/v1/backfills/99999/start", json={"by": "a"})
        assert resp.status_code in (401, 403)
