"""The reader_api kind's fixtures: tables served as JSON by a small FastAPI reader service.

The service holds each table's rows in memory and serves them as an application's API
would: by time range, offset-paged, JSON-typed (decimals as exact text, instants as ISO
8601, a time without zone as such), with its own filter (`keep`). A reader view cannot
exclude source rows, so specs with exclusions are skipped, naming why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException, Query, Response

from driftgauge.config.frozen import View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.reader_api.settings import ReaderApiStore
from tests.conformance.spec import (
    FIELD_ERRORS,
    READER_ONLY,
    STORE_ERRORS,
    Failures,
    Hung,
    Rule,
    Spec,
    Table,
)
from tests.integration.conftest import TIMEOUT, make_view, unique_name
from tests.integration.reader_service import ReaderService

TABLES: dict[str, list[dict[str, Any]]] = {}
"""The rows the service serves, by table name."""
NO_EXCLUSIONS = "reader_api is read as its reader sees it: it cannot exclude source rows"
_SERVICE: list[ReaderService] = []


def _json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)  # exact, as many APIs send money
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _instant(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def make_app() -> FastAPI:
    """Return the service: GET /t/{table}?from&to&time&offset&limit[&keep=col:op:value]."""
    app = FastAPI()

    @app.get("/t/{table}")
    def rows(
        table: str,
        start: str = Query(alias="from"),
        end: str = Query(alias="to"),
        time: str = "ts",
        offset: int = 0,
        limit: int = 100,
        keep: str | None = None,
    ) -> Response:
        if table not in TABLES:
            raise HTTPException(404, f"no table {table}")
        lo, hi = datetime.fromisoformat(start), datetime.fromisoformat(end)
        held = [r for r in TABLES[table] if lo <= _instant(r[time]) < hi]
        if keep is not None:
            column, op, value = keep.split(":", 2)
            rule = Rule("keep", column, op, value)  # type: ignore[arg-type]
            held = [r for r in held if rule.matches(r)]
        page = [{k: _json(v) for k, v in r.items()} for r in held[offset : offset + limit]]
        return Response(json.dumps({"result": {"rows": page}}), media_type="application/json")

    return app


def service() -> ReaderService:
    """Return the session's reader service, started on first use."""
    if not _SERVICE:
        _SERVICE.append(ReaderService(make_app()))
        _SERVICE[0].start()
    return _SERVICE[0]


def store(table: str, spec: Spec, base: str | None = None) -> ReaderApiStore:
    """Return a reader_api store reading one served table as `spec` says."""
    params = [("time", spec.time)]
    if spec.keep is not None:
        params.append(("keep", f"{spec.keep.column}:{spec.keep.op}:{spec.keep.value}"))
    return ReaderApiStore(
        name="api",
        url=f"{base or service().url}/t/{table}?from={{start}}&to={{end}}",
        params=tuple(params),
        rows_path="result.rows",
        paging="offset",
        size_param="limit",
        page_size=997,
        max_rows=1_000_000,
        max_window_days=366,
        timeout=TIMEOUT,
    )


def view(table: str, spec: Spec, base: str | None = None) -> View:
    """Return the View a check would have on a served table."""
    if spec.exclusions:
        pytest.skip(NO_EXCLUSIONS)
    return make_view(
        store(spec.relation or table, spec, base),  # type: ignore[arg-type]
        **spec.view_args(),
    )


class ReaderApiSource:
    """A table the service serves."""

    def __init__(self, table: Table, name: str) -> None:
        self.table = table
        self.name = name

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a reader_api adapter on the served table."""
        return await open_adapter(view(self.name, spec))

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """A run reads each window once: changes are not claimed (ROW_CHANGES)."""
        raise NotImplementedError

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """Timeouts are not claimed (TIMEOUTS)."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Stop serving the table."""
        TABLES.pop(self.name, None)


class ReaderApiGolden:
    """One served table per golden vector, values as their JSON text."""

    def __init__(self, vectors: Sequence[dict[str, Any]], at: datetime) -> None:
        self.vectors = vectors
        self.names = [unique_name(f"golden{n}") for n in range(len(vectors))]
        for name, vector in zip(self.names, vectors, strict=True):
            TABLES[name] = [
                {"k": vector["key"], "t": at.isoformat()}
                | {f"c{i}": f["value"] for i, f in enumerate(vector["fields"])}
            ]

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return an adapter on vector n's table (decimals as their exact text)."""
        assert not double
        vector = self.vectors[n]
        spec = Spec.of_golden(vector)
        return await open_adapter(view(self.names[n], spec))

    async def encoding(self, n: int) -> str:
        """Rows are hashed in Python: there is no engine-side encoding."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Stop serving the tables."""
        for name in self.names:
            TABLES.pop(name, None)


class ReaderApiFixtures:
    """Fixtures of the reader_api kind."""

    capabilities = frozenset({STORE_ERRORS, FIELD_ERRORS, READER_ONLY})
    failures: Failures | None = Failures(
        unreachable_match="cannot reach the API",
        missing_match=("HTTP 404", "HTTP 404"),
    )

    async def load(self, table: Table) -> ReaderApiSource:
        """Serve the table's rows under a fresh name."""
        name = unique_name(table.name)
        TABLES[name] = table.dicts()
        return ReaderApiSource(table, name)

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> ReaderApiGolden:
        """Serve one row per vector."""
        return ReaderApiGolden(vectors, at)

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a port nothing listens at (its first request fails)."""
        return await open_adapter(view("items", spec, "http://127.0.0.1:1"))
