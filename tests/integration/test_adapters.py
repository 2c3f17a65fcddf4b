"""The PostgreSQL and OpenSearch adapters agree with each other and with Python, on real stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.config.runtime import Exclusion, View
from driftgauge.core.errors import StoreQueryError, StoreUnavailable
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.opensearch import requests as rq
from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from tests.integration import dataset as ds
from tests.integration.conftest import (
    PG_DSN,
    TIMEOUT,
    dsn_for,
    make_view,
    os_store,
    pg_store,
    unique_name,
)

pytestmark = pytest.mark.integration

WINDOW = (ds.START, ds.END)


@dataclass
class Loaded:
    """The data set as loaded in both stores, with an adapter on each."""

    dsn: str
    index: str
    rows: list[ds.Row]
    pg: StoreAdapter
    os: StoreAdapter

    def pg_view(self, **kw: Any) -> View:
        """Return a view on the PG table (or `query=`), with the data set's fields."""
        where = {"fields": ds.FIELDS, **({} if "query" in kw else {"table": "items"}), **kw}
        return make_view(pg_store(self.dsn), key="id", time="ts", tz=ds.TZ.key, **where)

    def os_view(self, **kw: Any) -> View:
        """Return a view on the index, with the data set's fields."""
        where = {"index": self.index, "fields": ds.FIELDS, **kw}
        return make_view(os_store(), key="id", time="ts", tz=ds.TZ.key, **where)


@pytest.fixture(scope="module")
async def loaded(pg_database: str, os_client: AsyncOpenSearch,
                 os_index: Callable[[str], str]) -> AsyncIterator[Loaded]:
    """Load the same rows into a PG table and an OS index (3 shards) and open adapters."""
    rows = ds.make_rows()
    conn = await asyncpg.connect(pg_database, timeout=TIMEOUT)
    try:
        await conn.execute(ds.PG_DDL)
        await conn.copy_records_to_table("items", records=[r.record() for r in rows],
                                         timeout=TIMEOUT)
    finally:
        await conn.close()
    index = os_index("dg_adapters")
    await os_client.indices.create(index=index, body={
        "settings": {"number_of_shards": 3, "number_of_replicas": 0},
        "mappings": ds.OS_MAPPING})
    await async_bulk(os_client, ({"_index": index, "_id": r.id, "_source": r.doc()}
                                 for r in rows), refresh=True, chunk_size=2000)
    data = Loaded(pg_database, index, rows, pg=None, os=None)  # type: ignore[arg-type]
    data.pg = await open_adapter(data.pg_view())
    data.os = await open_adapter(data.os_view())
    try:
        yield data
    finally:
        await data.pg.close()
        await data.os.close()


async def _rows(adapter: StoreAdapter, prefixes: list[str] | None = None) -> list[Any]:
    return sorted([(r.key, r.key_hash, r.row_hash, r.event_time)
                   async for r in adapter.iter_rows(*WINDOW, prefixes)])


@pytest.mark.parametrize("granularity", ["day", "hour"])
async def test_buckets_agree_with_python(loaded: Loaded, granularity: str) -> None:
    want = ds.python_buckets(loaded.rows, granularity)
    assert await loaded.pg.bucket_digests(*WINDOW, granularity) == want  # type: ignore[arg-type]
    assert await loaded.os.bucket_digests(*WINDOW, granularity) == want  # type: ignore[arg-type]
    assert sum(b.agg.count for b in want) == ds.ROWS
    if granularity == "day":
        assert len(want) == 6
    else:  # the spring-forward day has 23 local hours
        assert sum(b.start.day == 10 for b in want) == 23


async def test_opensearch_chunked_window_equals_python(loaded: Loaded) -> None:
    assert isinstance(loaded.os, OpenSearchAdapter)
    chunked = OpenSearchAdapter(loaded.os_view(), loaded.os._client, max_chunk_rows=1500)
    counts = [(int(b.start.timestamp() * 1000), b.agg.count)
              for b in ds.python_buckets(loaded.rows, "day")]
    assert len(rq.plan_chunks(*WINDOW, counts, 1500, 1000)) == 6
    assert await chunked.bucket_digests(*WINDOW, "hour") == ds.python_buckets(loaded.rows, "hour")


@pytest.mark.parametrize(("depth", "within"), [(1, None), (2, None), (3, ["0", "a7", "ff"])])
async def test_prefix_digests_agree_with_python(loaded: Loaded, depth: int,
                                                within: list[str] | None) -> None:
    want = ds.python_prefixes(loaded.rows, depth, within)
    assert await loaded.pg.prefix_digests(*WINDOW, depth, within) == want
    assert await loaded.os.prefix_digests(*WINDOW, depth, within) == want
    assert len(want) == (16**depth if within is None else len(want))
    assert await loaded.pg.prefix_digests(*WINDOW, depth, []) == {}


@pytest.mark.parametrize("prefixes", [None, ["f", "01"]])
async def test_iter_rows_yield_identical_rows(loaded: Loaded, prefixes: list[str] | None) -> None:
    want = ds.python_rows(loaded.rows, prefixes)
    assert await _rows(loaded.pg, prefixes) == want
    assert await _rows(loaded.os, prefixes) == want
    assert len(want) == ds.ROWS if prefixes is None else 0 < len(want) < ds.ROWS


async def test_opensearch_pages_never_split_a_duplicated_key(
        os_client: AsyncOpenSearch, os_index: Callable[[str], str], loaded: Loaded) -> None:
    index = os_index("dg_pages")
    await os_client.indices.create(index=index, body={
        "settings": {"number_of_shards": 3, "number_of_replicas": 0},
        "mappings": ds.OS_MAPPING})
    # Key i has i + 1 copies; pages of 4 must grow to hold the 12 copies of k11.
    rows = [replace(loaded.rows[i], id=f"k{i:02d}") for i in range(12) for _ in range(i + 1)]
    await async_bulk(os_client, ({"_index": index, "_source": r.doc()} for r in rows),
                     refresh=True)
    view = make_view(os_store(), key="id", time="ts", fields=ds.FIELDS, tz=ds.TZ.key,
                     index=index)
    adapter = await OpenSearchAdapter.open(view)
    adapter.page_size = 4
    try:
        got = await _rows(adapter)
    finally:
        await adapter.close()
    assert got == ds.python_rows(rows)
    assert len(got) == 78


async def _pg_exec(dsn: str, sql: str, *args: Any) -> None:
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        await conn.execute(sql, *args, timeout=TIMEOUT)
    finally:
        await conn.close()


@pytest.mark.parametrize("change", ["label", "delete", "duplicate"])
async def test_one_row_change_moves_exactly_one_bucket(
        loaded: Loaded, os_client: AsyncOpenSearch, change: str) -> None:
    victim = loaded.rows[123]
    before = ds.python_buckets(loaded.rows, "day")
    if change == "label":
        changed = victim.with_label("changed")
        after_rows = [changed if r is victim else r for r in loaded.rows]
        pg_sql, os_op = "UPDATE items SET label = 'changed' WHERE id = $1", "update"
    elif change == "delete":
        after_rows = [r for r in loaded.rows if r is not victim]
        pg_sql, os_op = "DELETE FROM items WHERE id = $1", "delete"
    else:
        after_rows = [*loaded.rows, victim]
        pg_sql, os_op = "INSERT INTO items SELECT * FROM items WHERE id = $1", "copy"
    await _pg_exec(loaded.dsn, pg_sql, victim.id)
    if os_op == "update":
        await os_client.update(index=loaded.index, id=victim.id, body={"doc": {"label": "changed"}},
                               params={"refresh": "true"})
    elif os_op == "delete":
        await os_client.delete(index=loaded.index, id=victim.id, params={"refresh": "true"})
    else:
        await os_client.index(index=loaded.index, id=victim.id + "-copy", body=victim.doc(),
                              params={"refresh": "true"})
    try:
        want = ds.python_buckets(after_rows, "day")
        assert await loaded.pg.bucket_digests(*WINDOW, "day") == want
        assert await loaded.os.bucket_digests(*WINDOW, "day") == want
    finally:
        await _pg_exec(loaded.dsn, "DELETE FROM items WHERE id = $1", victim.id)
        conn = await asyncpg.connect(loaded.dsn, timeout=TIMEOUT)
        try:
            await conn.copy_records_to_table("items", records=[victim.record()])
        finally:
            await conn.close()
        if os_op == "copy":
            await os_client.delete(index=loaded.index, id=victim.id + "-copy")
        await os_client.index(index=loaded.index, id=victim.id, body=victim.doc(),
                              params={"refresh": "true"})
    moved = [(b.agg, a.agg) for b, a in zip(before, want, strict=True) if b != a]
    assert len(moved) == 1
    old, new = moved[0]
    _, h = victim.hashes()
    if change == "label":
        assert (new.count, new.distinct_keys) == (old.count, old.distinct_keys)
        assert new.digest != old.digest
    elif change == "delete":
        assert (new.count, new.distinct_keys) == (old.count - 1, old.distinct_keys - 1)
        assert new.digest == (old.digest - h) % 2**64
    else:  # a sum sees the second copy; XOR would cancel it
        assert (new.count, new.distinct_keys) == (old.count + 1, old.distinct_keys)
        assert new.digest == (old.digest + h) % 2**64
    assert await loaded.os.bucket_digests(*WINDOW, "day") == before  # restored


async def test_reader_filter_yields_the_filtered_view(loaded: Loaded) -> None:
    visible = [r for r in loaded.rows if r.tier != "c"]
    want = ds.python_buckets(visible, "day")
    os_adapter = await open_adapter(loaded.os_view(
        filter={"bool": {"must_not": [{"term": {"tier": "c"}}]}}))
    pg_adapter = await open_adapter(loaded.pg_view(query="SELECT * FROM items WHERE tier <> 'c'"))
    try:
        for adapter in (os_adapter, pg_adapter):
            assert await adapter.bucket_digests(*WINDOW, "day") == want
            assert await adapter.prefix_digests(*WINDOW, 1) == ds.python_prefixes(visible, 1)
            assert len([r async for r in adapter.iter_rows(*WINDOW, ["e"])]) == len(
                ds.python_rows(visible, ["e"]))
    finally:
        await os_adapter.close()
        await pg_adapter.close()
    assert want != ds.python_buckets(loaded.rows, "day")
    assert sum(b.agg.count for b in want) == len(visible) < ds.ROWS


async def test_exclusions_are_counted_by_reason_and_kept_out(loaded: Loaded) -> None:
    want = ds.python_buckets(loaded.rows, "day", ds.pg_reason)
    pg_rules = (Exclusion("no_label", where="label IS NULL"),
                Exclusion("tier_c", where="tier = 'c'"))
    os_rules = (Exclusion("no_label", query={"bool": {"must_not": {"exists": {"field": "label"}}}}),
                Exclusion("tier_c", query={"term": {"tier": "c"}}))
    expected_rows = [r for r in loaded.rows if ds.pg_reason(r) is None]
    for view in (loaded.pg_view(exclusions=pg_rules), loaded.os_view(exclusions=os_rules)):
        adapter = await open_adapter(view)
        try:
            assert await adapter.bucket_digests(*WINDOW, "day") == want
            assert await adapter.prefix_digests(*WINDOW, 1) == ds.python_prefixes(expected_rows, 1)
            assert await _rows(adapter) == ds.python_rows(expected_rows)
        finally:
            await adapter.close()
    last = want[-1]
    assert last.agg.count == 0 and sum(last.excluded.values()) == ds.ONLY_EXCLUDED
    assert set(want[0].excluded) == {"no_label", "tier_c"}
    # The conservation law: expected + excluded = every source row in the window.
    assert sum(b.agg.count + sum(b.excluded.values()) for b in want) == ds.ROWS


async def test_postgres_errors_are_ours(loaded: Loaded) -> None:
    unreachable = make_view(pg_store("postgresql://postgres@127.0.0.1:1/postgres"), key="id",
                            time="ts", fields={}, table="items")
    with pytest.raises(StoreUnavailable, match="pg: connect"):
        await open_adapter(unreachable)
    adapter = await open_adapter(loaded.pg_view(table="no_such_table"))
    try:
        with pytest.raises(StoreQueryError, match="no_such_table"):
            await adapter.bucket_digests(*WINDOW, "day")
        with pytest.raises(StoreQueryError, match="42P01"):
            _ = [r async for r in adapter.iter_rows(*WINDOW)]
    finally:
        await adapter.close()


async def test_postgres_refuses_a_non_utf8_database() -> None:
    name = unique_name("dg_ascii")
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    try:
        await admin.execute(f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' "
                            "LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
        view = make_view(pg_store(dsn_for(name)), key="id", time="ts", fields={}, table="t")
        with pytest.raises(StoreQueryError, match="server_encoding is SQL_ASCII"):
            await open_adapter(view)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_opensearch_errors_are_ours(loaded: Loaded) -> None:
    missing = await open_adapter(loaded.os_view(index=unique_name("dg_missing")))
    unreachable = await open_adapter(make_view(
        os_store("http://127.0.0.1:1"), key="id", time="ts", fields={}, index="x"))
    text_field = await open_adapter(loaded.os_view(
        fields={"label": ("label_text", "string")}))
    try:
        with pytest.raises(StoreQueryError, match="index_not_found"):
            await missing.bucket_digests(*WINDOW, "day")
        with pytest.raises(StoreQueryError, match="index_not_found"):
            _ = [r async for r in missing.iter_rows(*WINDOW)]
        with pytest.raises(StoreUnavailable, match="cannot connect"):
            await unreachable.prefix_digests(*WINDOW, 1)
        with pytest.raises(StoreQueryError, match="label_text"):
            await text_field.prefix_digests(*WINDOW, 1)
    finally:
        for adapter in (missing, unreachable, text_field):
            await adapter.close()
