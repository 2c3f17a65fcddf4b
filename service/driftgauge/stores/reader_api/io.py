"""The reader API's I/O boundary: the httpx client, paced and paged requests, errors mapped."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import httpx

from driftgauge.core.errors import (
    SecretError,
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.stores import retries
from driftgauge.stores.backoff import DEFAULT_POLICY, RetryPolicy, next_wait, retry_after_seconds
from driftgauge.stores.reader_api.paths import MISSING, lookup
from driftgauge.stores.reader_api.settings import ReaderApiStore

log = logging.getLogger("driftgauge.stores.retry")


def open_client(store: ReaderApiStore) -> httpx.AsyncClient:
    """Return the client every view of the store shares, its credentials resolved."""
    auth: httpx.Auth | None = None
    headers = {"Accept": "application/json"}
    try:
        if store.bearer is not None:
            headers["Authorization"] = f"Bearer {store.bearer.reveal()}"
        elif store.username is not None and store.password is not None:
            auth = httpx.BasicAuth(store.username, store.password.reveal())
    except SecretError as exc:
        raise StoreQueryError(store.name, f"auth: {exc}") from None
    return httpx.AsyncClient(
        timeout=store.timeout,
        verify=store.verify_certs,
        auth=auth,
        headers=headers,
        follow_redirects=False,
    )


async def store_pool(store: ReaderApiStore) -> httpx.AsyncClient:
    """Return the client every view of the store shares (no request is made yet)."""
    return open_client(store)


async def close_pool(client: httpx.AsyncClient) -> None:
    """Close a client opened by store_pool."""
    await client.aclose()


def iso(moment: datetime) -> str:
    """Return an aware instant as the UTC ISO 8601 text the placeholders take."""
    if moment.tzinfo is None:
        raise ValueError("time bounds must be timezone-aware")
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def fill(template: str, start: datetime, end: datetime, *, in_url: bool) -> str:
    """Return `template` with {start} and {end} replaced by the bounds (quoted in a URL)."""
    lo, hi = iso(start), iso(end)
    if in_url:
        lo, hi = quote(lo, safe=""), quote(hi, safe="")
    return template.replace("{start}", lo).replace("{end}", hi)


class Pace:
    """Space requests at least 1/rate seconds apart (no limit when rate is None)."""

    def __init__(self, rate: float | None) -> None:
        self._gap = 0.0 if rate is None else 1.0 / rate
        self._next = 0.0

    async def wait(self) -> None:
        """Sleep until the next request may go."""
        now = time.monotonic()
        if self._next > now:
            await asyncio.sleep(self._next - now)
        self._next = max(now, self._next) + self._gap


RETRY_STATUS = frozenset({429, *range(500, 600)})
"""Statuses a read tries again: a throttle and every server error, transient by nature."""


async def get_json(
    client: httpx.AsyncClient,
    store: ReaderApiStore,
    url: str,
    params: dict[str, str],
    what: str,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> Any:
    """GET one page and return its JSON (decimals kept exact); failures are StoreErrors.

    A 429, a 5xx or a reset or refused connection is tried again with jittered backoff
    while the policy and the run's deadline allow, each retry counted in stores.retries.
    """
    for attempt in range(1, policy.attempts + 1):
        try:
            return await _get_json(client, store, url, params, what)
        except _Retryable as exc:
            wait = next_wait(exc.asked, attempt, policy)
            fields = {"store": store.name, "what": what, "attempt": attempt, "reason": exc.reason}
            if isinstance(wait, str):
                log.warning("store read failed; not retried", extra=fields | {"why": wait})
                raise type(exc.error)(store.name, f"{exc.message} ({wait})") from exc.error
            log.warning(
                "store read failed; retrying", extra=fields | {"delay_seconds": round(wait, 3)}
            )
            retries.count(store.name, exc.reason)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")


class _Retryable(Exception):
    """A failed read worth trying again, with the error it is if it is not."""

    def __init__(self, error: StoreError, message: str, reason: str, asked: float | None) -> None:
        super().__init__(str(error))
        self.error, self.message, self.reason, self.asked = error, message, reason, asked


async def _get_json(
    client: httpx.AsyncClient, store: ReaderApiStore, url: str, params: dict[str, str], what: str
) -> Any:
    """GET one page once; a failure worth retrying raises _Retryable."""
    try:
        async with asyncio.timeout(store.timeout):
            response = await client.get(url, params=params)
    except Exception as exc:
        mapped = translate_error(store.name, what, exc)
        if mapped is None:
            raise
        # A hang is not retried: a second wait would multiply it, not shorten it.
        if isinstance(exc, httpx.ConnectError | httpx.ReadError | httpx.RemoteProtocolError):
            raise _Retryable(mapped, _strip(mapped, store.name), "connection", None) from exc
        raise mapped from exc
    if response.status_code >= 400:
        error = status_error(store.name, what, response)
        if response.status_code in RETRY_STATUS:
            reason = "throttled" if response.status_code == 429 else "unavailable"
            asked = retry_after_seconds(response.headers.get("retry-after"))
            raise _Retryable(error, _strip(error, store.name), reason, asked)
        raise error
    try:
        return json.loads(response.text, parse_float=Decimal)
    except ValueError:
        raise StoreQueryError(
            store.name,
            f"{what}: the response is not JSON "
            f"(HTTP {response.status_code}, "
            f"{response.headers.get('content-type', 'no content type')})",
        ) from None


def _strip(error: StoreError, store: str) -> str:
    text, prefix = str(error), f"{store}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


async def pages(
    client: httpx.AsyncClient,
    store: ReaderApiStore,
    start: datetime,
    end: datetime,
    pace: Pace,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> AsyncIterator[tuple[str, list[Any]]]:
    """Yield (which page, rows) of every page of [start, end), following the pagination.

    Which page is the text errors name it by: its number, the URL and its paging parameter.
    """
    # httpx's params replace a URL's own query, so the template's query joins them here.
    parts = urlsplit(store.url)
    url = fill(urlunsplit(parts._replace(query="")), start, end, in_url=True)
    query = [*parse_qsl(parts.query, keep_blank_values=True), *store.params]
    base = {k: fill(v, start, end, in_url=False) for k, v in query}
    if store.size_param is not None and store.paging != "none":
        base[store.size_param] = str(store.page_size)
    page, offset, cursor = store.first_page, 0, None
    for n in range(1, 1_000_000):
        params = dict(base)
        if store.paging == "page":
            params[store.page_param] = str(page)
        elif store.paging == "offset":
            params[store.offset_param] = str(offset)
        elif store.paging == "cursor" and cursor is not None:
            params[store.cursor_param] = cursor
        at = {k: v for k, v in params.items() if k not in base}
        where = f"page {n} of {store.url}" + (
            f" ({', '.join(f'{k}={v}' for k, v in at.items())})" if at else ""
        )
        await pace.wait()
        body = await get_json(client, store, url, params, where, policy)
        rows = lookup(body, store.rows_path)
        if not isinstance(rows, list):
            got = "nothing" if rows is MISSING else type(rows).__name__
            raise StoreQueryError(
                store.name,
                f"page {n}: rows_path "
                f"{store.rows_path or '(the body)'!r} holds {got}, "
                "not a list of rows",
            )
        yield where, rows
        if store.paging == "none" or (store.paging in ("page", "offset") and not rows):
            return
        page, offset = page + 1, offset + len(rows)
        if store.paging == "cursor":
            assert store.cursor_path is not None
            nxt = lookup(body, store.cursor_path)
            if nxt is MISSING or nxt is None or nxt == "":
                return
            if str(nxt) == cursor:
                raise StoreQueryError(
                    store.name,
                    f"page {n}: the cursor at {store.cursor_path!r} did not move ({nxt!r})",
                )
            cursor = str(nxt)
    raise StoreQueryError(store.name, "more than a million pages")


def status_error(store: str, what: str, response: httpx.Response) -> StoreError:
    """Return our exception for an HTTP error status."""
    code = response.status_code
    detail = " ".join(response.text[:200].split())
    message = f"{what}: HTTP {code}{f' ({detail})' if detail else ''}"
    if code in (401, 403):
        return StorePermissionError(store, message)
    if code in (408, 504):
        return StoreTimeout(store, f"{what}: no answer within the timeout (HTTP {code})")
    if code == 429 or code >= 500:
        return StoreUnavailable(store, message)
    return StoreQueryError(store, message)


def translate_error(store: str, what: str, exc: BaseException) -> StoreError | None:
    """Return our exception for an httpx or socket error; None for anything else (a bug)."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return StoreTimeout(store, f"{what}: no answer within the timeout")
    if isinstance(exc, httpx.TransportError | OSError):
        return StoreUnavailable(
            store, f"{what}: cannot reach the API ({type(exc).__name__}: {exc})"
        )
    if isinstance(exc, httpx.HTTPError):
        return StoreQueryError(store, f"{what}: {type(exc).__name__}: {exc}")
    return None
