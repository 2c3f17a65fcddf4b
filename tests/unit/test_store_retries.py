"""The retry layer of OpenSearch reads and its counter, against docs/metrics.md."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import opensearchpy as osp
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftgauge import budget
from driftgauge.core.errors import StoreError, StoreTimeout, StoreUnavailable
from driftgauge.metrics.collector import build_registry
from driftgauge.metrics.stores import store_retries_part
from driftgauge.stores import retries
from driftgauge.stores.opensearch import retry as os_retry
from driftgauge.stores.opensearch.client import translate_error

from .metrics_doc import documented_rows, labels_and_values

FAST = os_retry.RetryPolicy(attempts=4, base=0.001, cap=0.004, reserve=0.0)


def throttled(
    cause: str = "es_rejected_execution_exception",
    retry_after: str | None = None,
    durability: str | None = None,
) -> osp.TransportError:
    err: dict[str, Any] = {"type": cause, "reason": "queue capacity = 1000"}
    if durability is not None:
        err["durability"] = durability
    exc = osp.TransportError(429, cause, {"error": {"root_cause": [err], **err}})
    exc.retry_after = retry_after  # type: ignore[attr-defined]
    return exc


class Flaky:
    """A read that fails with the given errors first, then answers."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"


async def call(flaky: Flaky, policy: os_retry.RetryPolicy = FAST) -> str:
    return await os_retry.call(
        flaky, store="os", what="read", translate=translate_error, policy=policy
    )


async def test_429_503_and_resets_are_retried_and_counted() -> None:
    before = retries.retry_counts()
    flaky = Flaky(
        throttled(),
        osp.TransportError(503, "unavailable", None),
        osp.ConnectionError("N/A", "reset by peer", OSError()),
    )
    assert await call(flaky) == "answer"
    assert flaky.calls == 4
    after = retries.retry_counts()
    for reason in ("throttled", "unavailable", "connection"):
        assert after[("os", reason)] - before.get(("os", reason), 0) == 1


@pytest.mark.parametrize(
    "error",
    [
        osp.ConnectionTimeout("TIMEOUT", "read timeout", TimeoutError()),
        osp.TransportError(400, "parsing_exception", None),
        throttled("circuit_breaking_exception", durability="PERMANENT"),
    ],
    ids=["timeout", "400", "permanent-breaker"],
)
async def test_what_a_retry_cannot_fix_fails_at_once(error: BaseException) -> None:
    flaky = Flaky(error)
    with pytest.raises(StoreError):
        await call(flaky)
    assert flaky.calls == 1


async def test_giving_up_names_the_store_the_cause_and_the_attempts() -> None:
    flaky = Flaky(*[throttled()] * 4)
    with pytest.raises(
        StoreUnavailable,
        match=r"^os: read: cluster answered 429 "
        r"\(es_rejected_execution_exception: queue capacity = 1000\) "
        r"\(gave up after 4 attempts\)$",
    ):
        await call(flaky)
    assert flaky.calls == 4


def test_retry_after_is_a_minimum_and_a_long_one_is_refused() -> None:
    policy = os_retry.RetryPolicy(base=0.1, max_retry_after=30)
    assert 2.0 <= os_retry._wait(throttled(retry_after="2"), 1, policy) <= 2.1  # type: ignore[operator]
    assert "Retry-After 60s" in str(os_retry._wait(throttled(retry_after="60"), 1, policy))
    assert os_retry.retry_after(throttled(retry_after="Wed, 21 Oct 2015 07:28:00 GMT")) == 0


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    policy = os_retry.RetryPolicy(base=1.0, cap=4.0)
    rng = random.Random(1)
    waits = [[policy.backoff(n, rng) for n in range(5)] for _ in range(50)]
    for row in waits:
        for n, wait in enumerate(row):
            step = min(4.0, 2.0**n)
            assert step / 2 <= wait <= step
    assert len({round(row[2], 6) for row in waits}) > 40  # jittered, not in step


async def test_no_retry_starts_past_the_run_deadline() -> None:
    # Every wait (2.5-5 s) is longer than the whole budget, so the first failure must give
    # up at once; a busy machine cannot push the test past its own deadline.
    policy = os_retry.RetryPolicy(attempts=10, base=5.0, cap=5.0, reserve=0.0)
    flaky = Flaky(*[osp.TransportError(503, "unavailable", None)] * 10)
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with budget.run_timeout(2.0):
        with pytest.raises(StoreUnavailable, match="the run's deadline leaves"):
            await call(flaky, policy)
    assert loop.time() - began < 2.0
    assert flaky.calls == 1
    assert budget.remaining() is None


async def test_a_cancelled_read_is_not_retried() -> None:
    flaky = Flaky(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await call(flaky)
    assert flaky.calls == 1


def test_a_hang_is_a_timeout_not_a_retry() -> None:
    exc = osp.ConnectionTimeout("TIMEOUT", "x", TimeoutError())
    assert os_retry.retry_reason(exc) is None
    assert isinstance(translate_error("os", "read", exc), StoreTimeout)


def _documented() -> dict[str, tuple[str, set[str], set[str]]]:
    return {
        name: (kind, *labels_and_values(cell)) for name, kind, cell in documented_rows(("Stores",))
    }


def test_exposition_matches_the_documented_stores_section() -> None:
    part = store_retries_part(["os"], counts=lambda: {("os", "throttled"): 3})
    text = generate_latest(build_registry([part])).decode()
    [fam] = list(text_string_to_metric_families(text))
    samples = {
        (s.labels["store"], s.labels["reason"]): s.value
        for s in fam.samples
        if s.name.endswith("_total")
    }
    kind, labels, values = _documented()[fam.name + "_total"]
    assert fam.type == kind == "counter"
    assert {"store", "reason"} == labels
    assert values == set(retries.REASONS)
    assert samples == {("os", r): (3.0 if r == "throttled" else 0.0) for r in retries.REASONS}
