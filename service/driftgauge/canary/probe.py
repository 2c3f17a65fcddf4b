"""One canary: write a sentinel as the sync job, read it back through the reader view, remove it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import quote

import httpx

from driftgauge.config.runtime import Canary, Check
from driftgauge.core.errors import DriftgaugeError, StorePermissionError, StoreTimeout
from driftgauge.stores.opensearch import querydsl
from driftgauge.stores.opensearch.settings import OpenSearchStore

Result = Literal["ok", "permission", "not_visible", "timeout", "error"]
RESULTS: tuple[Result, ...] = ("ok", "permission", "not_visible", "timeout", "error")
KeyPicker = Callable[[datetime, datetime], Awaitable[str | None]]
"""Return one real key of the source rows in [start, end), or None if there is none."""
CLEANUP_SECONDS = 5.0


@dataclass(frozen=True)
class CanaryResult:
    """How one canary ended; `detail` says why when it did not succeed."""

    check: str
    result: Result
    started_at: datetime
    duration: float
    key: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Return True when the sentinel was written and seen through the reader view."""
        return self.result == "ok"


class _Failed(Exception):
    """A step of the canary failed with a classified result."""

    def __init__(self, result: Result, detail: str) -> None:
        self.result = result
        self.detail = detail
        super().__init__(detail)


def sentinel_id(check: str) -> str:
    """Return the sentinel's document id: one per check, so a missed cleanup never piles up."""
    return f"driftgauge-canary-{check}"


def previous_day(check: Check, now: datetime) -> tuple[datetime, datetime]:
    """Return [start, end) of the local day before `now` in the check's time zone."""
    today = now.astimezone(check.timezone).date()
    prev = today - timedelta(days=1)
    return (datetime(prev.year, prev.month, prev.day, tzinfo=check.timezone),
            datetime(today.year, today.month, today.day, tzinfo=check.timezone))


def _fill(value: Any, key: str, now: str, token: str) -> Any:
    if isinstance(value, str):
        return value.replace("{key}", key).replace("{now}", now).replace("{token}", token)
    if isinstance(value, dict):
        return {k: _fill(v, key, now, token) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, key, now, token) for v in value]
    return value


def sentinel_document(check: Check, canary: Canary, key: str, token: str,
                      now: datetime) -> dict[str, Any]:
    """Return the sentinel: the configured layout, the real key, the event time and the marker."""
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    doc: dict[str, Any] = _fill(canary.document, key, stamp, token)
    doc.setdefault(check.reader.time_column, stamp)
    doc[check.reader.key_column] = key
    doc[canary.marker] = token
    return doc


def read_back_query(check: Check, canary: Canary, key: str, token: str) -> dict[str, Any]:
    """Return the reader's filter minus its sentinel-hiding clause, for this key and token."""
    reader_filter = querydsl.without_marker_clause(check.reader.filter or {}, canary.marker)
    return {"bool": {"filter": [reader_filter,
                                {"term": {check.reader.key_column: key}},
                                {"term": {canary.marker: token}}]}}


def http_client(store: OpenSearchStore, timeout: float,
                transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """Return an HTTP client with the store's credentials and a deadline on every call."""
    auth = None
    if store.username is not None:
        auth = httpx.BasicAuth(store.username,
                               store.password.reveal() if store.password is not None else "")
    return httpx.AsyncClient(base_url=store.url, auth=auth, verify=store.verify_certs,
                             timeout=min(store.timeout, timeout), transport=transport)


def _error_of(resp: httpx.Response) -> tuple[str, str]:
    try:
        err = resp.json().get("error")
    except ValueError:
        return "error", resp.text[:200]
    if isinstance(err, dict):
        return str(err.get("type", "error")), str(err.get("reason", ""))[:300]
    return "error", str(err)[:300]


def _classify(step: str, resp: httpx.Response) -> None:
    """Raise a classified failure for an unsuccessful response; return on success."""
    if resp.status_code < 300:
        return
    kind, reason = _error_of(resp)
    detail = f"{step}: HTTP {resp.status_code} {kind}: {reason}"
    # 403 is both a lost privilege and an index write block or read-only index.
    if resp.status_code in (401, 403):
        raise _Failed("permission", detail)
    raise _Failed("error", detail)


async def _write(client: httpx.AsyncClient, canary: Canary, doc_id: str,
                 doc: dict[str, Any]) -> None:
    index, ident = quote(canary.index, safe=""), quote(doc_id, safe="")
    # refresh=wait_for: the read-back then tests visibility, not the refresh interval.
    if canary.write == "index":
        resp = await client.put(f"/{index}/_doc/{ident}", params={"refresh": "wait_for"},
                                json=doc)
    else:
        resp = await client.post(f"/{index}/_update/{ident}", params={"refresh": "wait_for"},
                                 json={"doc": doc, "doc_as_upsert": True})
    _classify("write the sentinel as the sync job", resp)


async def _read_back(client: httpx.AsyncClient, check: Check, query: dict[str, Any]) -> int:
    index = quote(check.reader.index or "", safe=",*")
    step = "read the sentinel back through the reader view"
    resp = await client.post(f"/{index}/_search",
                             params={"allow_partial_search_results": "false"},
                             json={"size": 0, "track_total_hits": True, "query": query})
    _classify(step, resp)
    body = resp.json()
    _complete(step, body)
    total = body.get("hits", {}).get("total", {})
    return int(total.get("value", 0) if isinstance(total, dict) else total)


def _complete(step: str, body: dict[str, Any]) -> None:
    """Fail unless every shard answered: a shard failure arrives as HTTP 200."""
    # The sentinel may sit on the shard that failed: neither seen nor unseen is known.
    shards = body.get("_shards") or {}
    failed = int(shards.get("failed", 0)) + int(bool(body.get("timed_out")))
    if failed or shards.get("failures"):
        first = (shards.get("failures") or [{}])[0]
        reason = first.get("reason") if isinstance(first, dict) else None
        kind = reason.get("type", "error") if isinstance(reason, dict) else "timed_out"
        raise _Failed("error", f"{step}: {shards.get('failed', 0)} of "
                      f"{shards.get('total', '?')} shards failed or timed out ({kind}); "
                      "partial answer refused")


async def _remove(client: httpx.AsyncClient, canary: Canary, doc_id: str) -> str:
    """Delete the sentinel; return '' or why it could not be removed."""
    index, ident = quote(canary.index, safe=""), quote(doc_id, safe="")
    try:
        async with asyncio.timeout(CLEANUP_SECONDS):
            resp = await client.delete(f"/{index}/_doc/{ident}", params={"refresh": "true"})
    except (TimeoutError, httpx.HTTPError) as exc:
        return f"; the sentinel was not removed ({type(exc).__name__})"
    if resp.status_code >= 300 and resp.status_code != 404:
        kind, _ = _error_of(resp)
        return f"; the sentinel was not removed (HTTP {resp.status_code} {kind})"
    return ""


async def run_canary(check: Check, pick_key: KeyPicker, *, now: datetime | None = None,
                     writer: httpx.AsyncBaseTransport | None = None,
                     reader: httpx.AsyncBaseTransport | None = None) -> CanaryResult:
    """Write, read back and remove the check's sentinel; never raises for a store failure."""
    canary = check.canary
    if canary is None:
        raise ValueError(f"check {check.name!r} has no canary")
    started = now or datetime.now(UTC)
    clock = time.monotonic()
    key: str | None = None
    result: Result = "ok"
    detail = ""
    if not isinstance(check.reader.store, OpenSearchStore) \
            or not isinstance(canary.store, OpenSearchStore):
        raise ValueError(f"check {check.name!r}: the canary needs an opensearch reader view")
    w = http_client(canary.store, canary.timeout, writer)
    r = http_client(check.reader.store, canary.timeout, reader)
    wrote = False
    try:
        async with asyncio.timeout(canary.timeout):
            key = await _pick(check, pick_key, started)
            token = uuid.uuid4().hex
            doc_id = sentinel_id(check.name)
            wrote = True
            await _write(w, canary, doc_id, sentinel_document(check, canary, key, token, started))
            seen = await _read_back(r, check, read_back_query(check, canary, key, token))
            if seen == 0:
                raise _Failed("not_visible", "the sentinel was written but the reader view "
                              f"does not return it (index {check.reader.index!r})")
    except _Failed as exc:
        result, detail = exc.result, exc.detail
    except (TimeoutError, httpx.TimeoutException):
        result, detail = "timeout", f"no answer within {canary.timeout:g}s"
    except (httpx.HTTPError, ValueError) as exc:
        # ValueError: a response that is not the JSON OpenSearch sends.
        result, detail = "error", f"{type(exc).__name__}: {exc}"
    finally:
        try:
            if wrote:
                detail += await _remove(w, canary, sentinel_id(check.name))
        finally:
            await w.aclose()
            await r.aclose()
    return CanaryResult(check.name, result, started, time.monotonic() - clock, key,
                        detail.lstrip("; "))


async def _pick(check: Check, pick_key: KeyPicker, now: datetime) -> str:
    start, end = previous_day(check, now)
    try:
        key = await pick_key(start, end)
    except StorePermissionError as exc:
        raise _Failed("permission", f"pick a key from the source: {exc}") from None
    except StoreTimeout as exc:
        raise _Failed("timeout", f"pick a key from the source: {exc}") from None
    except DriftgaugeError as exc:
        raise _Failed("error", f"pick a key from the source: {exc}") from None
    if key is None:
        raise _Failed("error", f"the source has no row on {start.date()} to key the sentinel")
    return key
