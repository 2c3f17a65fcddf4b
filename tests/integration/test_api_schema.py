"""The OpenAPI schema's contract: stable ids, the bearer scheme, one paging style; the page's files.

The browser walk of the page is tests/e2e/test_page.py; here the schema and the static
files are read as a client reads them, from an app on the real state database.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from driftgauge.api.openapi import OPERATION_IDS
from driftgauge.api.page import STATIC

from .app_helpers import AUTH
from .service_helpers import schema_name
from .test_api_hardening import config, serve, window

pytestmark = pytest.mark.integration
KEY_LISTS = {"listDayKeys", "listLedgerRunKeys"}  # reads that reveal row keys


@pytest.fixture(scope="module")
async def http(pg_database: str) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(config(pg_database, schema_name())) as client:
        yield client


INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00")


def operations(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): op for path, ops in schema["paths"].items() for method, op in ops.items()
    }


async def test_every_operation_has_its_hand_chosen_id(http: httpx.AsyncClient) -> None:
    ops = operations((await http.get("/openapi.json")).json())
    assert set(ops) == set(OPERATION_IDS), set(ops) ^ set(OPERATION_IDS)
    assert {key: op["operationId"] for key, op in ops.items()} == OPERATION_IDS
    assert len(set(OPERATION_IDS.values())) == len(OPERATION_IDS)
    assert all(re.fullmatch(r"[a-z][A-Za-z]+", i) for i in OPERATION_IDS.values())


async def test_schema_declares_the_bearer_scheme_where_a_token_is_asked(
    http: httpx.AsyncClient,
) -> None:
    schema = (await http.get("/openapi.json")).json()
    scheme = schema["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    for (method, path), op in operations(schema).items():
        if method != "get" or op["operationId"] in KEY_LISTS:
            assert op["security"] == [{"bearer": []}], (method, path)
        elif path.startswith("/api/v1") or path == "/metrics":
            # public_read: true, so the token is optional: {} first.
            assert op["security"] == [{}, {"bearer": []}], (method, path)
        else:
            assert "security" not in op, (method, path)


async def test_private_reads_require_the_bearer_in_the_schema(pg_database: str) -> None:
    async with serve(config(pg_database, schema_name(), public_read=False)) as client:
        schema = (await client.get("/openapi.json", headers=AUTH)).json()
    read = operations(schema)[("get", "/api/v1/checks/{check}/days")]
    assert read["security"] == [{"bearer": []}]


async def test_every_list_pages_by_limit_and_offset(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()
    lists = []
    for (method, _), op in operations(schema).items():
        names = {p["name"] for p in op.get("parameters", []) if not p.get("deprecated")}
        if method == "get" and names & {"limit", "offset", "page", "page_size", "before"}:
            lists.append(op["operationId"])
            assert {"limit", "offset"} <= names and not names & {"page", "page_size", "before"}
    assert len(lists) >= 10, lists


async def test_page_and_its_assets_are_served_from_the_package(http: httpx.AsyncClient) -> None:
    page = await http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    refs = re.findall(r'(?:src|href)="([^"#][^"]*)"', page.text)
    assert {"static/page.js", "static/page.css"} <= set(refs)
    for ref in refs:
        if ref.startswith("static/"):
            resp = await http.get("/" + ref)
            assert resp.status_code == 200, ref
            assert resp.content == (STATIC / ref.removeprefix("static/")).read_bytes()
    # No file the page ships reaches for another host.
    for path in STATIC.glob("*.*"):
        assert not re.search(r"https?://", path.read_text(encoding="utf-8")), path.name


async def test_docs_load_swagger_ui_from_this_server(http: httpx.AsyncClient) -> None:
    docs = await http.get("/docs")
    refs = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
    assert refs and all(r.startswith("/static/swagger/") for r in refs), refs
    for ref in refs:
        assert (await http.get(ref)).status_code == 200, ref
    bundle = await http.get("/static/swagger/swagger-ui-bundle.js")
    # Swagger UI 5 renders OpenAPI 3.1, the version FastAPI writes.
    assert (await http.get("/openapi.json")).json()["openapi"].startswith("3.1")
    assert b"SwaggerUIBundle" in bundle.content


async def test_instants_are_written_in_utc_with_plus_zero(http: httpx.AsyncClient) -> None:
    opened = await http.post(
        "/api/v1/ledger/runs",
        headers=AUTH,
        json=window("2026-03-09T01:00:00+01:00", "2026-03-09T23:00:00Z", client_run_id="instants"),
    )
    assert opened.status_code in (200, 201), opened.text
    run = opened.json()
    # Given with an offset and with Z, answered in the one form of every answer.
    assert run["window_start"] == "2026-03-09T00:00:00+00:00"
    assert run["window_end"] == "2026-03-09T23:00:00+00:00"
    assert INSTANT.fullmatch(run["opened_at"]), run["opened_at"]
    listed = (await http.get("/api/v1/ledger/runs", params={"limit": 1})).json()
    assert INSTANT.fullmatch(listed[0]["opened_at"])
    ran = (await http.get("/api/v1/checks")).json()["checks"]
    last = [c["last_run"] for c in ran if c["last_run"]]
    for r in last:
        assert all(INSTANT.fullmatch(r[k]) for k in ("started_at", "window_start")), r
    text = (await http.get("/api/v1/ledger/runs")).text + (await http.get("/api/v1/checks")).text
    assert not re.search(r"\d\d:\d\d(\.\d+)?Z", text), "an instant written with Z"
