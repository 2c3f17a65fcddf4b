"""One canary: write a sentinel as the sync job, read it back through the reader view, remove it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

from driftgauge.config.frozen import Canary, Check, Store
from driftgauge.core.errors import DriftgaugeError, StorePermissionError, StoreTimeout
from driftgauge.stores.opensearch import client, querydsl
from driftgauge.stores.opensearch.settings import OpenSearchStore

Result = Literal["ok", "permission", "not_visible", "timeout", "error"]
RESULTS: tuple[Result, ...] = get_args(Result)
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
    return (
        datetime(prev.year, prev.month, prev.day, tzinfo=check.timezone),
        datetime(today.year, today.month, today.day, tzinfo=check.timezone),
    )


def _fill(value: Any, key: str, now: str, token: str) -> Any:
    if isinstance(value, str):
        return value.replace("{key}", key).replace("{now}", now).replace("{token}", token)
    if isinstance(value, dict):
        return {k: _fill(v, key, now, token) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, key, now, token) for v in value]
    return value


def sentinel_document(
    check: Check, canary: Canary, key: str, token: str, now: datetime
) -> dict[str, Any]:
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
    return {
        "bool": {
            "filter": [
                reader_filter,
                {"term": {check.reader.key_column: key}},
                {"term": {canary.marker: token}},
            ]
        }
    }


Connections = Callable[[Store], Awaitable[Any]]
"""Return the shared OpenSearch client of a store (StorePools.connection)."""


@contextmanager
def _classified(step: str) -> Iterator[None]:
    """Turn a refusal by the cluster into a classified failure naming the step."""
    try:
        yield
    except Exception as exc:
        refused = client.refusal(exc)
        if refused is None:
            raise
        status, kind, reason = refused
        detail = f"{step}: HTTP {status} {kind}: {reason}"
        # 403 is both a lost privilege and an index write block or read-only index.
        raise _Failed("permission" if status in (401, 403) else "error", detail) from None


async def _write(w: Any, canary: Canary, doc_id: str, doc: dict[str, Any], seconds: float) -> None:
    # refresh=wait_for: the read-back then tests visibility, not the refresh interval.
    params = {"refresh": "wait_for", "request_timeout": seconds}
    with _classified("write the sentinel as the sync job"):
        if canary.write == "index":
            await w.index(index=canary.index, id=doc_id, body=doc, params=params)
        else:
            await w.update(
                index=canary.index,
                id=doc_id,
                params=params,
                body={"doc": doc, "doc_as_upsert": True},
            )


async def _read_back(r: Any, check: Check, query: dict[str, Any], seconds: float) -> int:
    step = "read the sentinel back through the reader view"
    with _classified(step):
        body = await r.search(
            index=check.reader.index or "",
            params={"allow_partial_search_results": "false", "request_timeout": seconds},
            body={"size": 0, "track_total_hits": True, "query": query},
        )
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
        raise _Failed(
            "error",
            f"{step}: {shards.get('failed', 0)} of "
            f"{shards.get('total', '?')} shards failed or timed out ({kind}); "
            "partial answer refused",
        )


async def _remove(w: Any, canary: Canary, doc_id: str) -> str:
    """Delete the sentinel; return '' or why it could not be removed."""
    try:
        async with asyncio.timeout(CLEANUP_SECONDS):
            await w.delete(index=canary.index, id=doc_id, params={"refresh": "true"})
    except Exception as exc:
        refused = client.refusal(exc)
        if refused is not None:
            status, kind, _ = refused
            return (
                "" if status == 404 else (f"; the sentinel was not removed (HTTP {status} {kind})")
            )
        if client.translate_error(canary.store.name, "remove the sentinel", exc) is None:
            raise
        return f"; the sentinel was not removed ({type(exc).__name__})"
    return ""


async def run_canary(
    check: Check,
    pick_key: KeyPicker,
    *,
    now: datetime | None = None,
    connections: Connections | None = None,
) -> CanaryResult:
    """Write, read back and remove the check's sentinel; never raises for a store failure.

    With `connections` both stores' shared clients are used; without, the canary opens
    its own and closes them.
    """
    canary = check.canary
    if canary is None:
        raise ValueError(f"check {check.name!r} has no canary")
    started = now or datetime.now(UTC)
    clock = time.monotonic()
    key: str | None = None
    result: Result = "ok"
    detail = ""
    if not isinstance(check.reader.store, OpenSearchStore) or not isinstance(
        canary.store, OpenSearchStore
    ):
        raise ValueError(f"check {check.name!r}: the canary needs an opensearch reader view")
    if connections is None:
        w, r = client.open_client(canary.store), client.open_client(check.reader.store)
    else:
        w, r = await connections(canary.store), await connections(check.reader.store)
    wait = min(canary.timeout, canary.store.timeout)
    wrote = False
    try:
        async with asyncio.timeout(canary.timeout):
            key = await _pick(check, pick_key, started)
            token = uuid.uuid4().hex
            doc_id = sentinel_id(check.name)
            wrote = True
            await _write(
                w, canary, doc_id, sentinel_document(check, canary, key, token, started), wait
            )
            seen = await _read_back(
                r,
                check,
                read_back_query(check, canary, key, token),
                min(canary.timeout, check.reader.store.timeout),
            )
            if seen == 0:
                raise _Failed(
                    "not_visible",
                    "the sentinel was written but the reader view "
                    f"does not return it (index {check.reader.index!r})",
                )
    except _Failed as exc:
        result, detail = exc.result, exc.detail
    except Exception as exc:
        if client.timed_out(exc):
            result, detail = "timeout", f"no answer within {canary.timeout:g}s"
        elif client.translate_error(canary.store.name, "canary", exc) is not None:
            result, detail = "error", f"{type(exc).__name__}: {exc}"
        else:
            raise
    finally:
        try:
            if wrote:
                detail += await _remove(w, canary, sentinel_id(check.name))
        finally:
            if connections is None:
                await w.close()
                await r.close()
    return CanaryResult(
        check.name, result, started, time.monotonic() - clock, key, detail.lstrip("; ")
    )


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
