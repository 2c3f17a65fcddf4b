"""The opensearch kind's fixtures: a fresh index per table on the real OpenSearch.

The elasticsearch kind uses them too, on another cluster URL (kind_elasticsearch.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.config.frozen import Exclusion, View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.opensearch import requests as rq
from driftgauge.stores.opensearch.settings import OpenSearchStore
from tests.conformance.proxied import ProxiedHung, open_behind
from tests.conformance.spec import (
    DESCRIBES_FIELDS,
    DOUBLE_DECIMALS,
    ENGINE_ENCODING,
    FIELD_ERRORS,
    ROW_CHANGES,
    STORE_ERRORS,
    TIMEOUTS,
    ColumnType,
    Failures,
    Rule,
    Spec,
    Table,
    double_safe,
)
from tests.faults.proxy import Fault, HttpFaultProxy
from tests.integration.conftest import OS_URL, TIMEOUT, make_view, os_store, unique_name

TYPES: dict[ColumnType, str] = {
    "key": "keyword",
    "text": "keyword",
    "instant": "date_nanos",
    "instant_ms": "date",
    "naive_ms": "date",
    "decimal": "double",
    "integer": "long",
    "boolean": "boolean",
    "analyzed": "text",
}


def query(rule: Rule) -> dict[str, Any]:
    """Return the query DSL of a rule."""
    if rule.op == "null":
        return {"bool": {"must_not": {"exists": {"field": rule.column}}}}
    term = {"term": {rule.column: rule.value}}
    return term if rule.op == "eq" else {"bool": {"must_not": [term]}}


def _value(value: Any, type_: ColumnType) -> Any:
    if type_ == "instant":
        return value.isoformat()
    if type_ == "instant_ms":
        return value.isoformat(timespec="milliseconds")
    if type_ == "naive_ms":
        return value.replace(tzinfo=UTC).isoformat(timespec="milliseconds")
    if type_ == "decimal":
        return float(value)
    return value


def _doc(table: Table, row: tuple[Any, ...]) -> dict[str, Any]:
    """Return a row as a document; a NULL is a missing field."""
    return {
        name: _value(value, type_)
        for (name, type_), value in zip(table.columns, row, strict=True)
        if value is not None
    }


def view(
    index: str,
    spec: Spec,
    url: str = OS_URL,
    timeout: float | None = None,
    kind: str = "opensearch",
) -> View:
    """Return the View a check of store kind `kind` would have on the index as `spec` says."""
    store = replace(os_store(url), kind=kind)
    if timeout is not None:
        store = replace(store, timeout=timeout)
    where: dict[str, Any] = {"index": spec.relation or index}
    if spec.keep is not None:
        where["filter"] = query(spec.keep)
    return make_view(
        store,
        **spec.view_args(),
        exclusions=tuple(Exclusion(r.name, query=query(r)) for r in spec.exclusions),
        **where,
    )


@dataclass
class OpenSearchSource:
    """A table as an index of its own."""

    table: Table
    index: str
    client: AsyncOpenSearch
    url: str
    kind: str

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return an OpenSearch adapter on the index."""
        return await open_adapter(view(self.index, spec, self.url, kind=self.kind))

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Delete the documents with that id and index `rows`, refreshing at once."""
        column = self.table.id_column
        assert column is not None
        await self.client.delete_by_query(
            index=self.index, body={"query": {"term": {column: row_id}}}, params={"refresh": "true"}
        )
        for i, row in enumerate(rows):
            await self.client.index(
                index=self.index,
                id=row_id + "-copy" * i,
                body=_doc(self.table, row),
                params={"refresh": "true"},
            )

    async def open_hung(self, spec: Spec, store_timeout: float) -> ProxiedHung:
        """Return an adapter reaching the cluster through an HTTP fault proxy."""
        parts = urlsplit(self.url)
        proxy = HttpFaultProxy((parts.hostname or "127.0.0.1", parts.port or 9200))

        async def opener(started: HttpFaultProxy) -> StoreAdapter:
            return await open_adapter(view(self.index, spec, started.url, store_timeout, self.kind))

        # Hanging, the proxy answers no request.
        return await open_behind(proxy, opener, lambda started: started.arm(Fault("hang")))

    async def drop(self) -> None:
        """Delete the index."""
        await _delete(self.client, self.index)


async def _delete(client: AsyncOpenSearch, index: str) -> None:
    """Delete `index`, then close the client."""
    try:
        await client.indices.delete(index=index, ignore_unavailable=True)
    finally:
        await client.close()


async def _create(
    client: AsyncOpenSearch, index: str, shards: int, mappings: dict[str, Any]
) -> None:
    await client.indices.create(
        index=index,
        body={
            "settings": {"number_of_shards": shards, "number_of_replicas": 0},
            "mappings": mappings,
        },
    )


def _golden_column(i: int, field: dict[str, Any], *, double: bool) -> str:
    value = field["value"]
    if field["type"] == "timestamp" and value is not None and value.startswith("1969"):
        return f"f{i}_tsms"  # date_nanos cannot hold instants before 1970
    if field["type"] == "decimal" and double:
        return f"f{i}_decdouble"
    return f"f{i}_{field['type']}"


@dataclass
class OpenSearchGolden:
    """An index with one document per golden vector, typed by dynamic templates."""

    index: str
    client: AsyncOpenSearch
    vectors: Sequence[dict[str, Any]]
    at: datetime
    store: OpenSearchStore

    def view(self, n: int, *, double: bool) -> View:
        """Return a view on vector n's document."""
        vector = self.vectors[n]
        return make_view(
            self.store,
            key=f"key_{vector['key_type']}",
            time="t",
            key_type=vector["key_type"],
            fields={
                f"c{i}": (_golden_column(i, f, double=double), f["type"])
                for i, f in enumerate(vector["fields"])
            },
            index=self.index,
            filter={"term": {"vid": str(n)}},
            timestamp_precision=vector.get("precision", "us"),
        )

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return an adapter on vector n's document."""
        return await open_adapter(self.view(n, double=double))

    async def encoding(self, n: int) -> str:
        """Return what the Painless script computes for vector n's document."""
        view_ = self.view(n, double=False)
        day = timedelta(days=1)
        body = rq.rows_body(view_, self.at - day, self.at + day, None, size=1, encoding=True)
        resp = await self.client.search(index=self.index, body=body)
        return str(resp["hits"]["hits"][0]["fields"]["r"][0]["encoding"])

    async def drop(self) -> None:
        """Delete the index."""
        await _delete(self.client, self.index)


class OpenSearchFixtures:
    """Fixtures of the opensearch kind, or of a kind read by its adapter on another cluster."""

    def __init__(self, url: str = OS_URL, kind: str = "opensearch") -> None:
        self.url = url
        self.kind = kind

    capabilities = frozenset(
        {
            ENGINE_ENCODING,
            DOUBLE_DECIMALS,
            STORE_ERRORS,
            FIELD_ERRORS,
            ROW_CHANGES,
            TIMEOUTS,
            DESCRIBES_FIELDS,
        }
    )
    failures: Failures | None = Failures(
        unreachable_match="cannot connect",
        missing_relation=unique_name("dg_missing"),
        missing_match=("index_not_found", "index_not_found"),
    )

    async def load(self, table: Table) -> OpenSearchSource:
        """Create an index with the table's mapping holding its rows and return it."""
        client = AsyncOpenSearch(hosts=[self.url], timeout=TIMEOUT)
        index = unique_name(f"dg_conf_{table.name}")
        await _create(
            client,
            index,
            table.shards,
            {
                "properties": {
                    name: {"type": TYPES[type_]} for name, type_ in table.columns + table.declared
                }
            },
        )
        ids = [n for n, _ in table.columns].index(table.id_column) if table.id_column else None
        await async_bulk(
            client,
            (
                {
                    "_index": index,
                    "_source": _doc(table, row),
                    **({} if ids is None else {"_id": row[ids]}),
                }
                for row in table.rows
            ),
            refresh=True,
            chunk_size=2000,
        )
        return OpenSearchSource(table, index, client, self.url, self.kind)

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> OpenSearchGolden:
        """Index one document per vector, each typed column twice where a double holds it."""
        client = AsyncOpenSearch(hosts=[self.url], timeout=TIMEOUT)
        index = unique_name("dg_golden")
        templates = [
            ("*_string", "keyword"),
            ("*_decimal", "keyword"),
            ("*_decdouble", "double"),
            ("*_integer", "long"),
            ("*_boolean", "boolean"),
            ("*_timestamp", "date_nanos"),
            ("*_tsms", "date"),
        ]
        await _create(
            client,
            index,
            2,
            {
                "dynamic_templates": [
                    {m: {"match": m, "mapping": {"type": t}}} for m, t in templates
                ],
                "properties": {
                    "vid": {"type": "keyword"},
                    "t": {"type": "date"},
                    "key_string": {"type": "keyword"},
                    "key_integer": {"type": "long"},
                },
            },
        )
        docs = []
        for n, v in enumerate(vectors):
            doc: dict[str, Any] = {
                "vid": str(n),
                "t": at.isoformat(),
                f"key_{v['key_type']}": v["key"],
            }
            for i, f in enumerate(v["fields"]):
                if f["value"] is None:
                    continue  # a missing field is NULL
                doc[_golden_column(i, f, double=False)] = f["value"]
                if f["type"] == "decimal" and double_safe(f["value"]):
                    doc[_golden_column(i, f, double=True)] = float(f["value"])
            docs.append({"_index": index, "_source": doc})
        await async_bulk(client, docs, refresh=True)
        store = replace(os_store(self.url), kind=self.kind)
        return OpenSearchGolden(index, client, vectors, at, store)

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a port nothing listens at (OpenSearch fails at the first query)."""
        return await open_adapter(view("x", spec, "http://127.0.0.1:1", kind=self.kind))
