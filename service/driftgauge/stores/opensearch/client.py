"""The OpenSearch I/O boundary: the one client factory and the one map of its errors to ours."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from driftgauge.core.errors import (
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.stores.opensearch.settings import OpenSearchStore


@dataclass(frozen=True)
class Engine:
    """The calls that differ between the engines the opensearch adapter reads.

    Everything else (search with allow_partial_search_results=false and _shards, search_after
    in a point in time, Painless, histograms, mappings) is the same request on each engine.
    """

    name: str
    pit_open: str
    """The path after the index that opens a point in time."""
    pit_open_params: Mapping[str, str]
    """Query parameters besides keep_alive (OpenSearch: refuse a partial PIT)."""
    pit_id_field: str
    pit_close: str
    pit_close_body: Callable[[str], dict[str, Any]]
    pit_open_reports_shards: bool
    """True when the open answer carries _shards (then it is checked like a search's)."""

    async def open_pit(self, client: Any, index: str, keep_alive: str) -> dict[str, Any]:
        """Open a point in time on `index` and return the engine's answer."""
        answer: dict[str, Any] = await client.transport.perform_request(
            "POST",
            f"/{quote(index, safe=',*')}/{self.pit_open}",
            params={"keep_alive": keep_alive, **self.pit_open_params},
        )
        return answer

    def pit_id(self, answer: dict[str, Any]) -> str:
        """Return the id in the answer of open_pit."""
        return str(answer[self.pit_id_field])

    async def close_pit(self, client: Any, pit_id: str) -> None:
        """Free a point in time."""
        await client.transport.perform_request(
            "DELETE", self.pit_close, body=self.pit_close_body(pit_id)
        )


OPENSEARCH = Engine(
    name="OpenSearch",
    pit_open="_search/point_in_time",
    pit_open_params={"allow_partial_pit_creation": "false"},
    pit_id_field="pit_id",
    pit_close="/_search/point_in_time",
    pit_close_body=lambda pit_id: {"pit_id": [pit_id]},
    pit_open_reports_shards=True,
)


def open_client(store: OpenSearchStore) -> Any:
    """Return an async client for the store with its credentials (no request is made yet)."""
    from opensearchpy import AsyncOpenSearch

    from driftgauge.stores.opensearch import retry

    auth = None
    if store.username is not None:
        password = store.password.reveal() if store.password is not None else ""
        auth = (store.username, password)
    # No retries in the client: retry.py is the one retry layer, with backoff.
    return AsyncOpenSearch(
        hosts=[store.url],
        http_auth=auth,
        timeout=store.timeout,
        verify_certs=store.verify_certs,
        ssl_show_warn=False,
        connection_class=retry.HeaderKeepingConnection,
        max_retries=0,
        retry_on_timeout=False,
    )


async def store_pool(store: OpenSearchStore) -> Any:
    """Return the client every view of the store shares (no request is made yet)."""
    return open_client(store)


async def close_pool(client: Any) -> None:
    """Close a client opened by store_pool."""
    await client.close()


def translate_error(store: str, what: str, exc: BaseException) -> StoreError | None:
    """Return our exception for a client or socket error; None for anything else (a bug)."""
    import opensearchpy as osp

    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, osp.ConnectionTimeout | TimeoutError):
        return StoreTimeout(store, f"{what}: no answer within the timeout")
    if isinstance(exc, osp.ConnectionError):
        return StoreUnavailable(store, f"{what}: cannot connect ({exc.error})")
    if isinstance(exc, osp.TransportError):
        status = exc.status_code
        kind, reason = cause(exc.info)
        if status in (401, 403) or kind == "cluster_block_exception":
            return StorePermissionError(store, f"{what}: refused ({status} {kind}: {reason})")
        if status == 404:
            return StoreQueryError(store, f"{what}: not found ({kind}: {reason})")
        if status in (429, 502, 503, 504):
            return StoreUnavailable(store, f"{what}: cluster answered {status} ({kind}: {reason})")
        return StoreQueryError(store, f"{what}: rejected ({status} {kind}: {reason})")
    if isinstance(exc, osp.SerializationError):
        return StoreQueryError(store, f"{what}: unreadable response ({exc})")
    if isinstance(exc, osp.OpenSearchException | OSError):
        return StoreQueryError(store, f"{what}: {type(exc).__name__}: {exc}")
    return None


def cause(info: Any) -> tuple[str, str]:
    """Return the innermost error type and reason of an OpenSearch error body.

    Script errors say only "runtime error" at the top; the field and the problem sit
    under failed_shards[].reason.caused_by.
    """
    if not isinstance(info, dict) or not isinstance(info.get("error"), dict):
        return "error", str(info)[:300]
    err: dict[str, Any] = info["error"]
    for _ in range(8):
        shards = err.get("failed_shards")
        if isinstance(err.get("caused_by"), dict):
            err = err["caused_by"]
        elif shards and isinstance(shards[0], dict) and isinstance(shards[0].get("reason"), dict):
            err = shards[0]["reason"]
        else:
            break
    if err.get("type") == "search_phase_execution_exception":
        root = info["error"].get("root_cause") or [{}]
        err = root[0] if isinstance(root[0], dict) else err
    return str(err.get("type", "error")), str(err.get("reason", ""))[:300]


def refusal(exc: BaseException) -> tuple[int, str, str] | None:
    """Return (HTTP status, error type, reason) when the cluster answered `exc`, else None."""
    import opensearchpy as osp

    if (
        isinstance(exc, osp.TransportError)
        and not isinstance(exc, osp.ConnectionError)
        and isinstance(exc.status_code, int)
    ):
        kind, reason = cause(exc.info)
        return exc.status_code, kind, reason
    return None


def timed_out(exc: BaseException) -> bool:
    """Return True when `exc` is a request that got no answer in time."""
    import opensearchpy as osp

    return isinstance(exc, osp.ConnectionTimeout | TimeoutError)
