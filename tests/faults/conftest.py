"""A reconciliation of real stores through fault proxies: one data set, fresh adapters per run.

The source is a PostgreSQL table behind a TcpFaultProxy, the reader an OpenSearch index
(3 shards) behind an HttpFaultProxy; the state database is reached directly, since the
faults are the stores' and a run must still be recorded.
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.config.frozen import Config, View
from driftgauge.configfile.loader import load_text
from driftgauge.engine.result import RunResult
from driftgauge.jobs.adapters import AdapterPool, Adapters
from driftgauge.jobs.runner import run_check
from driftgauge.state.store import StateStore
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from tests.faults.proxy import HttpFaultProxy, TcpFaultProxy
from tests.integration.conftest import (  # noqa: F401  (fixtures)
    OS_URL,
    PG_DSN,
    TIMEOUT,
    os_client,
    os_index,
    pg_database,
    unique_name,
)
from tests.store_fixtures import load_index

DAY0 = datetime(2024, 5, 6, tzinfo=UTC)
DAYS = 3
PER_DAY = 600
NOW = DAY0 + timedelta(days=DAYS, hours=6)
STORE_TIMEOUT = 3.0
"""Both stores' timeout: a hang must end a run within it."""
RUN_DEADLINE = 60.0
PAGE_SIZE = 100
"""Small pages, so one export takes several PIT searches."""
MISSING = {"k0-0007", "k0-0300", "k1-0042", "k2-0599"}
MISMATCHED = {"k1-0100", "k2-0011"}
EXTRA = {"x1-0001"}

CONFIG = """
stores:
  src: {kind: postgres, dsn: "<PG>", timeout_seconds: <T>, pool_max: 2}
  dst: {kind: opensearch, url: "<OS>", timeout_seconds: <T>}
state: {dsn: "<STATE>", schema: <SCHEMA>}
checks:
  items:
    source: {store: src, table: items, key: id, time: ts}
    reader: {store: dst, index: <INDEX>, key: id, time: ts}
    fields: {label: string}
    settle: 1h
    drilldown: {leaf_rows: 150, max_depth: 3}
    schedule: {recent: {every: 1h, days: 3}}
"""


def rows() -> list[tuple[str, datetime, str]]:
    """Return the source rows: PER_DAY a day, spread over the day."""
    return [
        (
            f"k{d}-{i:04d}",
            DAY0 + timedelta(days=d, seconds=i * 86_400 // PER_DAY + 1),
            f"label {i % 17}",
        )
        for d in range(DAYS)
        for i in range(PER_DAY)
    ]


def reader_rows() -> list[tuple[str, datetime, str]]:
    """Return the reader's copy: MISSING gone, MISMATCHED relabelled, EXTRA added."""
    out = [
        (k, t, "changed" if k in MISMATCHED else label)
        for k, t, label in rows()
        if k not in MISSING
    ]
    return [*out, ("x1-0001", DAY0 + timedelta(days=1, hours=5), "label 3")]


@dataclass
class World:
    """The loaded stores, their proxies and the state database of the suite."""

    config: Config
    state: StateStore
    pg: TcpFaultProxy
    os: HttpFaultProxy
    baseline: Any = None

    async def adapters(self) -> Adapters:
        """Open fresh adapters through the proxies, as a run opens them (preflight included)."""
        pool = AdapterPool(self.config.checks, _small_pages)
        try:
            return await pool.get("items")
        except BaseException:
            await pool.close()
            raise

    async def reconcile(
        self, adapters: Adapters | None = None, *, deadline: float = RUN_DEADLINE
    ) -> tuple[RunResult, float]:
        """Run the check once through the proxies; return its result and wall time.

        Without `adapters`, the run opens its own, as the service's pool does.
        """
        check = self.config.checks["items"]
        pool = AdapterPool(self.config.checks, _small_pages)
        clock = time.monotonic()
        try:
            result = await run_check(
                check,
                adapters or pool.getter("items"),
                self.state,
                DAY0,
                DAY0 + timedelta(days=DAYS),
                trigger="manual",
                now=NOW,
                deadline=deadline,
            )
        finally:
            elapsed = time.monotonic() - clock
            self.pg.set_mode("pass")
            self.os.disarm()
            await pool.close()
            if adapters is not None:
                for side in adapters:
                    await side.close()
        return result, elapsed


async def _small_pages(view: View) -> StoreAdapter:
    adapter = await open_adapter(view)
    if isinstance(adapter, OpenSearchAdapter):
        adapter.page_size = PAGE_SIZE
    return adapter


def counts(result: RunResult) -> list[tuple[Any, ...]]:
    """Return what a run found, bucket by bucket, with the keys it named."""
    return [
        (
            b.start.date().isoformat(),
            b.status,
            b.expected,
            b.visible,
            b.missing,
            b.extra,
            b.mismatched,
            b.duplicates,
            sorted((k.key, k.kind) for k in b.samples),
        )
        for b in result.buckets
    ]


async def _load(pg_dsn: str, client: AsyncOpenSearch, index: str) -> None:
    conn = await asyncpg.connect(pg_dsn, timeout=TIMEOUT)
    try:
        await conn.execute(
            "CREATE TABLE items (id text PRIMARY KEY, ts timestamptz NOT NULL, label text)"
        )
        await conn.copy_records_to_table("items", records=rows(), timeout=TIMEOUT)
    finally:
        await conn.close()
    await load_index(
        client,
        index,
        {"id": "keyword", "ts": "date_nanos", "label": "keyword"},
        ({"_id": k, "id": k, "ts": t.isoformat(), "label": label} for k, t, label in reader_rows()),
        shards=3,
        replicas=0,
    )


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


@pytest.fixture(scope="module")
async def world(
    pg_database: str,  # noqa: F811
    os_client: AsyncOpenSearch,  # noqa: F811
    os_index: Any,  # noqa: F811
) -> AsyncIterator[World]:
    """Yield the loaded stores behind started proxies, with the state in a fresh schema."""
    index = os_index("dg_faults")
    await _load(pg_database, os_client, index)
    pg = TcpFaultProxy(_host_port(PG_DSN))
    os = HttpFaultProxy(_host_port(OS_URL))
    await pg.start()
    await os.start()
    proxied = urlsplit(pg_database)._replace(netloc=f"postgres@127.0.0.1:{pg.port}").geturl()
    text = (
        CONFIG.replace("<PG>", proxied)
        .replace("<OS>", os.url)
        .replace("<T>", str(STORE_TIMEOUT))
        .replace("<STATE>", pg_database)
        .replace("<SCHEMA>", unique_name("dg_faults"))
        .replace("<INDEX>", index)
    )
    config = load_text(text)
    state = await StateStore.open(config.state)
    try:
        yield World(config, state, pg, os)
    finally:
        await state.close()
        await pg.stop()
        await os.stop()


@pytest.fixture(autouse=True)
def collect_garbage() -> Iterator[None]:
    """Collect after each case, so a client a run left open fails that case, not a later one."""
    yield
    gc.collect()
