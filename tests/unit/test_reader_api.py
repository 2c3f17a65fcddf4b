"""The reader_api kind without a server: JSON paths, bounds, config refusals, its coverage."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from driftgauge.config.secrets import Secret
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError, StoreQueryError
from driftgauge.stores import registry
from driftgauge.stores.reader_api import io
from driftgauge.stores.reader_api.paths import MISSING, lookup
from driftgauge.stores.reader_api.settings import ReaderApiStore

BERLIN = ZoneInfo("Europe/Berlin")
CONFIG = """
stores:
  pg: {kind: postgres, dsn: "postgresql://u@127.0.0.1:1/x"}
  api:
    kind: reader_api
    url: URL
    max_window_days: 3
state: {dsn: "postgresql://u@127.0.0.1:1/state"}
checks:
  orders:
    source: {store: pg, table: orders, key: id, time: ts}
    reader: {store: api, key: id, time: ts, fields: {status: attributes.status}}
    fields: {status: string}
"""


def _load(url: str) -> object:
    return load_text(CONFIG.replace("URL", url))


def test_a_path_reaches_into_objects_and_lists() -> None:
    doc = {"data": {"items": [{"a": 1}, {"a": None}]}}
    assert lookup(doc, "data.items.1.a") is None
    assert lookup(doc, "data.items.0.a") == 1
    assert lookup(doc, "") is doc and lookup(doc, "$") is doc
    assert lookup(doc, "data.rows") is MISSING
    assert lookup(doc, "data.items.2") is MISSING
    assert lookup(doc, "data.items.0.a.b") is MISSING


def test_bounds_are_utc_iso_and_quoted_in_the_url() -> None:
    start = datetime(2026, 3, 29, tzinfo=BERLIN)
    end = start + timedelta(days=1)
    assert io.iso(start) == "2026-03-28T23:00:00Z"
    assert (
        io.fill("/x?from={start}&to={end}", start, end, in_url=True)
        == "/x?from=2026-03-28T23%3A00%3A00Z&to=2026-03-29T22%3A00%3A00Z"
    )  # 23 hours
    assert io.fill("{end}", start, end, in_url=False) == "2026-03-29T22:00:00Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        io.iso(datetime(2026, 3, 29))


def test_a_url_without_both_bounds_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"stores\.api\.url: \{end\} appears neither"):
        _load("http://h/x?from={start}")


def test_a_reader_api_view_names_no_table() -> None:
    text = CONFIG.replace("URL", "http://h/{start}/{end}").replace(
        "reader: {store: api,", "reader: {store: api, table: t,"
    )
    with pytest.raises(ConfigError, match=r"reader\.table: a reader_api view reads"):
        load_text(text)


def test_the_coverage_says_which_rows_are_read() -> None:
    config = load_text(CONFIG.replace("URL", "http://h/{start}/{end}"))
    check = config.checks["orders"]
    assert (
        registry.kind_of("reader_api").coverage(check.reader.store)
        == "bounded window of at most 3 days"
    )
    assert registry.kind_of("postgres").coverage(check.source.store) == registry.EVERY_ROW


async def test_credentials_come_from_env_and_file_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DG_TEST_API_TOKEN", "s3cret")
    (tmp_path / "pw").write_text("hunter2\n", encoding="utf-8")
    bearer = ReaderApiStore("api", "http://h/{start}/{end}", bearer=Secret("env:DG_TEST_API_TOKEN"))
    basic = ReaderApiStore(
        "api",
        "http://h/{start}/{end}",
        username="reader",
        password=Secret(f"file:{tmp_path / 'pw'}"),
    )
    async with io.open_client(bearer) as client:
        assert client.headers["authorization"] == "Bearer s3cret"
    async with io.open_client(basic) as client:
        request = client.build_request("GET", "http://h/x")
        assert isinstance(client.auth, httpx.BasicAuth)
        sent = next(client.auth.auth_flow(request)).headers["authorization"]
        assert sent == "Basic " + base64.b64encode(b"reader:hunter2").decode()
    unset = ReaderApiStore("api", "http://h/{start}/{end}", bearer=Secret("env:DG_TEST_UNSET"))
    with pytest.raises(StoreQueryError, match=r"api: auth: .*DG_TEST_UNSET is not set"):
        io.open_client(unset)
