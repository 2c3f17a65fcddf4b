"""Retry OpenSearch reads on transient failures: jittered backoff, Retry-After, a deadline.

This is the only retry layer: the client is opened with max_retries=0. Only idempotent
reads go through it (the adapter never writes; the canary's write never comes here).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from opensearchpy import AIOHttpConnection, TransportError

from driftgauge import budget
from driftgauge.core.errors import StoreError
from driftgauge.stores import retries

T = TypeVar("T")
log = logging.getLogger("driftgauge.stores.retry")

RETRY_STATUS = (429, 502, 503, 504)
Translate = Callable[[str, str, BaseException], StoreError | None]
"""The client's error map (client.translate_error): None for an error that is a bug."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one read."""

    attempts: int = 5
    """Tries in all, the first included."""
    base: float = 0.25
    """Seconds of the first backoff; each retry doubles it, up to `cap`."""
    cap: float = 8.0
    max_retry_after: float = 30.0
    """A longer Retry-After is not waited for: the read fails at once, saying so."""
    reserve: float = 1.0
    """Seconds of the run's deadline kept for the retried request itself."""

    def backoff(self, retry: int, rng: random.Random) -> float:
        """Return the wait before retry number `retry` (0-based): half fixed, half jitter."""
        step = min(self.cap, self.base * 2.0**retry)
        return step / 2 + rng.uniform(0, step / 2)


DEFAULT_POLICY = RetryPolicy()
_rng = random.Random()


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
    value = getattr(exc, "retry_after", None)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


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
    if attempt >= policy.attempts:
        return f"gave up after {attempt} attempts"
    wait = policy.backoff(attempt - 1, _rng)
    asked = retry_after(exc)
    if asked is not None:
        if asked > policy.max_retry_after:
            return f"Retry-After {asked:g}s is beyond the {policy.max_retry_after:g}s we wait"
        # Retry-After is a minimum; the jitter keeps replicas from returning in step.
        wait = asked + _rng.uniform(0, policy.base)
    left = budget.remaining()
    if left is not None and wait + policy.reserve > left:
        return (
            f"attempt {attempt}; the run's deadline leaves {max(left, 0):.1f}s, "
            f"the next try would start in {wait:.1f}s"
        )
    return wait


def _strip(error: StoreError, store: str) -> str:
    text = str(error)
    prefix = f"{store}: "
    return text[len(prefix) :] if text.startswith(prefix) else text
