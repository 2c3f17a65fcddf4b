"""When to try a store read again: jittered exponential backoff, Retry-After, the run's deadline."""

from __future__ import annotations

import email.utils
import random
from dataclasses import dataclass
from datetime import UTC, datetime

from driftgauge import budget


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


def retry_after_seconds(value: object) -> float | None:
    """Return the seconds a Retry-After header value (delta or HTTP date) asks for, if any."""
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


def next_wait(asked: float | None, attempt: int, policy: RetryPolicy) -> float | str:
    """Return the seconds to wait before the next attempt, or why there is none.

    `asked` is what the failed answer's Retry-After asked for (None: nothing).
    """
    if attempt >= policy.attempts:
        return f"gave up after {attempt} attempts"
    wait = policy.backoff(attempt - 1, _rng)
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
