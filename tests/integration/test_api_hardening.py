"""No input bricks the service: every bad request is a 4xx naming the field, on the real state DB.

Each test here is a regression test of one finding of the hardening review (issue 16).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.core.aggregate import Aggregate
from driftgauge.stores.memory import MemoryAdapter

from .app_helpers import AUTH, memory_app, posted, samples, serving
from .service_helpers import NOW, ORDERS, REVIEWS, STORES, filled, schema_name
from .test_ticks import sides

pytestmark = pytest.mark.integration
SCRAPE = "scrape-only-token"
JSON = {"Content-Type": "application/json"}

CONFIG = (
    STORES
    + """state: {dsn: "<DSN>", schema: <SCHEMA>}
api:
  tokens: ["<TOKEN>"]
  public_read: <PUBLIC>
  <EXTRA>
checks:
"""
    + REVIEWS
    + """    settle: 2h
    schedule: {recent: {every: 1h, days: 3}}
    ledger: {job: review-sync, summary_deadline: 6h}
"""
    + ORDERS
)


def config(dsn: str, schema: str, *, public_read: bool = True, extra: str = "") -> Config:
    return load_text(filled(CONFIG, dsn, schema, public=str(public_read).lower(), extra=extra))


def _clock() -> datetime:
    return NOW


@asynccontextmanager
async def serve(
    cfg: Config, adapters: dict[tuple[str, str], MemoryAdapter] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(
        memory_app(cfg, adapters or sides()[0], _clock, refresh_every=3600)
    ) as client:
        yield client


@pytest.fixture(scope="module")
async def http(pg_database: str) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(config(pg_database, schema_name())) as client:
        yield client


def window(start: str, end: str, **kw: Any) -> dict[str, Any]:
    return {"job": "review-sync", "window_start": start, "window_end": end, "input_rows": 3, **kw}


def locs(resp: httpx.Response) -> list[list[Any]]:
    assert resp.status_code == 422, resp.text
    return [e["loc"] for e in json.loads(resp.text)["detail"]]


async def open_run(http: httpx.AsyncClient, **kw: Any) -> int:
    body = window("2026-03-09T00:00:00+00:00", "2026-03-10T00:00:00+00:00", **kw)
    run_id: int = (await posted(http, "/api/v1/ledger/runs", body, 201))["id"]
    return run_id


# Finding 1: a window on 9999-12-31 was stored (201) and then broke every audit tick.
@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        ("9999-12-31T00:00:00+00:00", "9999-12-31T12:00:00+00:00", "window_start"),
        ("2026-03-09T00:00:00+00:00", "9999-12-31T23:00:00+00:00", "window_end"),
        ("0001-01-01T00:00:00+05:00", "2026-03-09T00:00:00+00:00", "window_start"),
        ("1999-12-31T00:00:00+00:00", "2026-03-09T00:00:00+00:00", "window_start"),
    ],
)
async def test_ledger_windows_out_of_range_are_refused_naming_the_field(
    http: httpx.AsyncClient, start: str, end: str, field: str
) -> None:
    resp = await http.post("/api/v1/ledger/runs", json=window(start, end), headers=AUTH)
    assert ["body", field] in locs(resp)
    assert "must be between 2000-01-01" in resp.text


async def _scrape(http: httpx.AsyncClient, **headers: str) -> dict[Any, float]:
    resp = await http.get("/metrics", headers=headers)
    assert resp.status_code == 200, resp.text
    return samples(resp.text)


# Finding 1: a bad row written around the API made every later start-up exit 3.
async def test_a_bad_ledger_row_neither_bricks_start_up_nor_hides_good_windows(
    pg_database: str,
) -> None:
    from driftgauge import background

    schema = schema_name()
    cfg = config(pg_database, schema)
    async with serve(cfg) as http:
        good = await open_run(http)
    conn = await asyncpg.connect(pg_database, timeout=30)
    try:
        bad = await conn.fetchval(
            f'INSERT INTO "{schema}".ledger_runs (job, window_start, window_end, window_day,'
            " input_rows, opened_at, closed_at, status) VALUES ('review-sync', $1, $2,"
            " '9999-12-31', 3, $3, $3, 'success') RETURNING id",
            datetime(9999, 12, 31, tzinfo=UTC),
            datetime(9999, 12, 31, 12, tzinfo=UTC),
            NOW,
        )
    finally:
        await conn.close()
    before = background.errors("ledger_deadlines")
    async with serve(cfg) as http:  # used to raise OverflowError out of the lifespan
        windows = (await http.get("/api/v1/ledger/windows")).json()
        # The good run's window (2026-03-09, due at 2026-03-10 06:00) is still judged.
        judged = {w["window_day"]: w for w in windows}
        assert judged["2026-03-09"]["breaches"] == ["missing_summary"]
        assert background.errors("ledger_deadlines") > before
        s = await _scrape(http)
        assert s[("driftgauge_background_errors_total", (("loop", "ledger_deadlines"),))] > 0
        # Closing the good run judges its window; closing the bad one is not a 500.
        closed = await http.post(
            f"/api/v1/ledger/runs/{good}/close", headers=AUTH, json={"status": "failed"}
        )
        assert closed.status_code == 200, closed.text
        again = await http.post(
            f"/api/v1/ledger/runs/{bad}/close", headers=AUTH, json={"status": "success"}
        )
        assert again.status_code == 200, again.text


INT_FIELDS = [
    (
        "/api/v1/ledger/runs",
        lambda v: window("2026-03-09T00:00:00Z", "2026-03-10T00:00:00Z", input_rows=v),
        ["body", "input_rows"],
    ),
    (
        "/api/v1/ledger/runs/{run}/batches",
        lambda v: {"batch_id": "b", "counts": [{"outcome": "written", "count": v}]},
        ["body", "counts", 0, "count"],
    ),
    (
        "/api/v1/ledger/runs/{run}/close",
        lambda v: {"status": "success", "counts": {"written": v}},
        ["body", "counts", "written"],
    ),
]


# Finding 2: a non-finite number was echoed in the 422 body, which could not be serialised.
@pytest.mark.parametrize("number", ["1e400", "NaN", "-Infinity"])
@pytest.mark.parametrize(
    ("path", "body", "loc"), INT_FIELDS, ids=["input_rows", "count", "written"]
)
async def test_non_finite_numbers_in_integer_fields_are_422(
    http: httpx.AsyncClient, number: str, path: str, body: Any, loc: list[Any]
) -> None:
    run = await open_run(http)
    text = json.dumps(body("__N__")).replace('"__N__"', number)
    resp = await http.post(path.format(run=run), content=text, headers={**AUTH, **JSON})
    assert loc in locs(resp)


SURROGATE = "x\ud800y"
TEXT_FIELDS = [
    (
        "/api/v1/ledger/runs",
        lambda s: window("2026-03-09T00:00:00Z", "2026-03-10T00:00:00Z", job=s),
        ["body", "job"],
    ),
    (
        "/api/v1/ledger/runs",
        lambda s: window("2026-03-09T00:00:00Z", "2026-03-10T00:00:00Z", client_run_id=s),
        ["body", "client_run_id"],
    ),
    (
        "/api/v1/ledger/runs/{run}/batches",
        lambda s: {"batch_id": s, "counts": [{"outcome": "written", "count": 1}]},
        ["body", "batch_id"],
    ),
    (
        "/api/v1/ledger/runs/{run}/batches",
        lambda s: {"batch_id": "b", "keys": [{"key": s, "outcome": "written"}]},
        ["body", "keys", 0, "key"],
    ),
    (
        "/api/v1/ledger/runs/{run}/batches",
        lambda s: {"batch_id": "b", "keys": [{"key": "k", "outcome": "skipped", "reason": s}]},
        ["body", "keys", 0, "reason"],
    ),
    (
        "/api/v1/ledger/runs/{run}/batches",
        lambda s: {"batch_id": "b", "keys": [{"key": "k", "outcome": "failed", "error": s}]},
        ["body", "keys", 0, "error"],
    ),
    (
        "/api/v1/ledger/runs/{run}/close",
        lambda s: {"status": "success", "message": s},
        ["body", "message"],
    ),
]


# Finding 2: a lone UTF-16 surrogate in any of the 7 text fields was a 500.
@pytest.mark.parametrize(
    ("path", "body", "loc"),
    TEXT_FIELDS,
    ids=["job", "client_run_id", "batch_id", "key", "reason", "error", "message"],
)
async def test_lone_surrogates_in_text_fields_are_422(
    http: httpx.AsyncClient, path: str, body: Any, loc: list[Any]
) -> None:
    run = await open_run(http)
    text = json.dumps(body(SURROGATE))  # ensure_ascii writes the surrogate as \ud800
    assert "\\ud800" in text
    resp = await http.post(path.format(run=run), content=text, headers={**AUTH, **JSON})
    assert loc in locs(resp)


# Finding 11: day=0 and until=0 were read as 1970-01-01.
@pytest.mark.parametrize(
    ("path", "params", "loc"),
    [
        ("/api/v1/checks/reviews/days/0", {}, ["path", "day"]),
        ("/api/v1/checks/reviews/days/1000000000", {}, ["path", "day"]),
        ("/api/v1/checks/reviews/days", {"until": "0"}, ["query", "until"]),
        ("/api/v1/checks/reviews/days", {"since": "0"}, ["query", "since"]),
        ("/api/v1/checks/reviews/days/9999-12-31", {}, ["path", "day"]),
        ("/api/v1/checks/reviews/days/1999-12-31/hours/3", {}, ["path", "day"]),
    ],
)
async def test_days_are_iso_dates_in_range(
    http: httpx.AsyncClient, path: str, params: dict[str, str], loc: list[Any]
) -> None:
    resp = await http.get(path, params=params, headers=AUTH)
    assert loc in locs(resp)


# Finding 11: the schema documented none of the 4xx answers the API gives.
async def test_openapi_documents_every_error_answer(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            where = f"{method.upper()} {path}"
            if path.startswith("/api/v1"):
                assert {"401", "403", "404", "503"} <= codes, where
            if method == "post" and path.startswith("/api/v1/ledger"):
                assert {"400", "409", "422"} <= codes, where
    assert "409" in schema["paths"]["/api/v1/checks/{check}/runs"]["post"]["responses"]
    hour = schema["paths"]["/api/v1/checks/{check}/days/{day}/hours/{hour}"]["get"]
    assert {"429", "502", "504"} <= set(hour["responses"])
    assert {"401", "403"} <= set(schema["paths"]["/metrics"]["get"]["responses"])


# Finding 6: api.public_read false left /metrics, /openapi.json and /docs open.
async def test_private_reads_close_metrics_and_the_schema(pg_database: str) -> None:
    cfg = config(
        pg_database, schema_name(), public_read=False, extra=f'metrics_tokens: ["{SCRAPE}"]'
    )
    async with serve(cfg) as http:
        for path in ("/metrics", "/openapi.json", "/docs", "/api/v1/ledger/runs"):
            assert (await http.get(path)).status_code == 401, path
        wrong = await http.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        scraped = await http.get("/metrics", headers={"Authorization": f"Bearer {SCRAPE}"})
        assert scraped.status_code == 200 and "driftgauge_build_info" in scraped.text
        assert (await http.get("/metrics", headers=AUTH)).status_code == 200
        # A scrape token opens /metrics only.
        other = await http.get("/api/v1/checks", headers={"Authorization": f"Bearer {SCRAPE}"})
        assert other.status_code == 401
        assert (await http.get("/openapi.json", headers=AUTH)).status_code == 200
        docs = await http.get("/docs", headers=AUTH)
        assert docs.status_code == 200 and "/openapi.json" in docs.text
        assert (await http.get("/healthz")).status_code == 200


async def test_metrics_public_opens_metrics_of_a_private_api(pg_database: str) -> None:
    cfg = config(pg_database, schema_name(), public_read=False, extra="metrics_public: true")
    async with serve(cfg) as http:
        assert (await http.get("/metrics")).status_code == 200
        assert (await http.get("/api/v1/checks")).status_code == 401


class Hung(MemoryAdapter):
    """A reader whose prefix query waits until released, like a slow store."""

    def __init__(self, rows: Sequence[Any]) -> None:
        super().__init__(list(rows))
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        self.entered.set()
        await self.release.wait()
        return await super().prefix_digests(start, end, depth, within)


# Finding 10: anyone could start live drill-downs, as many as they liked.
async def test_live_drill_downs_need_a_token_and_are_bounded(pg_database: str) -> None:
    adapters, _ = sides()
    hung = Hung([])
    adapters[("dst", "reviews")] = hung
    cfg = config(pg_database, schema_name(), extra="live_concurrency: 1")
    url = f"/api/v1/checks/reviews/days/{date(2026, 3, 8)}/hours/3"
    async with serve(cfg, adapters) as http:
        anon = await http.get(url, params={"live": "true"})
        assert anon.status_code == 401
        first = asyncio.create_task(http.get(url, params={"live": "true"}, headers=AUTH))
        await asyncio.wait_for(hung.entered.wait(), 10)
        busy = await http.get(url, params={"live": "true"}, headers=AUTH)
        assert busy.status_code == 429 and busy.headers["retry-after"].isdigit()
        assert "live" in busy.json()["detail"]
        hung.release.set()
        assert (await asyncio.wait_for(first, 10)).status_code == 200
        after = await http.get(url, params={"live": "true"}, headers=AUTH)
        assert after.status_code == 200


def test_the_range_ends_a_year_from_now() -> None:
    from driftgauge.core.bounds import day_problem

    assert day_problem(date(2027, 3, 10), NOW) is None
    assert day_problem(date(2027, 3, 12), NOW) == "must be between 2000-01-01 and 2027-03-11"
    assert day_problem(NOW.date() - timedelta(days=10000), NOW) is not None
