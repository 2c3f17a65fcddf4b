"""The OpenSearch I/O boundary: the one client factory and the one map of its errors to ours."""

from __future__ import annotations

from typing import Any

from driftgauge.core.errors import (
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.stores.opensearch.settings import OpenSearchStore


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
