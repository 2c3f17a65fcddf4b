"""Retry OpenSearch reads on transient failures: jittered backoff, Retry-After, a deadline.

This is the only retry layer: the client is opened with max_retries=0. Only idempotent
reads go through it (the adapter never writes; the canary's write never comes here).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from opensearchpy import AIOHttpConnection, TransportError

from driftgauge.core.errors import StoreError
from driftgauge.stores import retries
from driftgauge.stores.backoff import (
    DEFAULT_POLICY,
    RetryPolicy,
    next_wait,
    retry_after_seconds,
)

__all__ = ["DEFAULT_POLICY", "RetryPolicy", "call", "retry_after", "retry_reason"]

T = TypeVar("T")
log = logging.getLogger("driftgauge.stores.retry")

RETRY_STATUS = (429, 502, 503, 504)
Translate = Callable[[str, str, BaseException], StoreError | None]
"""The client's error map (client.translate_error): None for an error that is a bug."""


class HeaderKeepingConnection(AIOHttpConnection):
    """The aiohttp connection, keeping Retry-After on the errors that may carry it."""

    async def perform_request(
        self,
        method: str,
        url: str,
        params: Any = None,
        body: Any = None,
        timeout: Any = None,  # noqa: ASYNC109
        ignore: Any = (),
        headers: Any = None,
    ) -> Any:
        """Perform the request; a retryable status raises with `retry_after` set."""
        wanted = tuple(ignore)
        status, got, data = await super().perform_request(
            method,
            url,
            params,
            body,
            timeout=timeout,
            ignore=(*wanted, *RETRY_STATUS),
            headers=headers,
        )
        if status in RETRY_STATUS and status not in wanted:
            try:
                self._raise_error(status, data, got.get("content-type"))
            except TransportError as exc:
                exc.retry_after = got.get("retry-after")  # type: ignore[attr-defined]
                raise
        return status, got, data


def retry_reason(exc: BaseException) -> str | None:
    """Return why `exc` is worth retrying (a retries.REASONS value), or None if it is not."""
    import opensearchpy as osp

    if isinstance(exc, osp.ConnectionTimeout | osp.SSLError | TimeoutError):
        return None  # a hang: retrying would multiply the wait, not shorten it
    if isinstance(exc, osp.ConnectionError):
        return "connection"
    if isinstance(exc, osp.TransportError) and exc.status_code in RETRY_STATUS:
        if error_body(exc)[2] == "PERMANENT":
            return None  # a breaker that says so will trip again
        return "throttled" if exc.status_code == 429 else "unavailable"
    if isinstance(exc, osp.SerializationError):
        return "unreadable"
    return None


def error_body(exc: BaseException) -> tuple[str, str, str]:
    """Return (type, reason, durability) of an error body's root cause, '' when absent.

    A 429 is a full queue (es_rejected_execution_exception), a tripped breaker
    (circuit_breaking_exception) or a resource limit such as open scroll contexts: the
    body says which.
    """
    info = getattr(exc, "info", None)
    err = info.get("error") if isinstance(info, dict) else None
    if not isinstance(err, dict):
        return "", str(info or "")[:300], ""
    roots = err.get("root_cause")
    if isinstance(roots, list) and roots and isinstance(roots[0], dict):
        root: dict[str, Any] = roots[0]
    else:
        root = err
    return (
        str(root.get("type", "")),
        str(root.get("reason", ""))[:300],
        str(root.get("durability", err.get("durability", ""))),
    )


def retry_after(exc: BaseException) -> float | None:
    """Return the seconds a Retry-After header (delta or HTTP date) asks for, if any."""
    return retry_after_seconds(getattr(exc, "retry_after", None))


async def call(
    make: Callable[[], Awaitable[T]],
    *,
    store: str,
    what: str,
    translate: Translate,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> T:
    """Return the answer of `make()`, retrying transient failures; raise our StoreError."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return await make()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = translate(store, what, exc)
            if error is None:
                raise  # not the store's doing: a bug, never a store error nor a retry
            reason = retry_reason(exc)
            kind, cause, _ = error_body(exc)
            fields = {
                "store": store,
                "what": what,
                "attempt": attempt,
                "reason": reason,
                "status": getattr(exc, "status_code", None),
                "error_type": kind,
                "error_reason": cause,
            }
            if reason is None:
                raise error from exc
            wait = _wait(exc, attempt, policy)
            if isinstance(wait, str):
                log.warning("store read failed; not retried", extra=fields | {"why": wait})
                raise type(error)(store, f"{_strip(error, store)} ({wait})") from exc
            log.warning(
                "store read failed; retrying", extra=fields | {"delay_seconds": round(wait, 3)}
            )
            retries.count(store, reason)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _wait(exc: BaseException, attempt: int, policy: RetryPolicy) -> float | str:
    """Return the seconds to wait before the next attempt, or why there is none."""
    return next_wait(retry_after(exc), attempt, policy)


def _strip(error: StoreError, store: str) -> str:
    text = str(error)
    prefix = f"{store}: "
    return text[len(prefix) :] if text.startswith(prefix) else text
