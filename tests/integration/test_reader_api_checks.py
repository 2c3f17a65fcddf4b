"""PostgreSQL -> the reader's own HTTP API: the example's check on a real reader service.

The service (tests/integration/reader_service.py) serves an OpenSearch index holding
planted drift (missing, extra, mismatched and duplicated rows), hides rows by its own
filter, and can skip a page; the run must name exactly those keys, over a Berlin day that
springs forward (23 hours).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import (
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.engine.result import RunResult
from driftgauge.stores import open_adapter, retries
from driftgauge.stores.backoff import RetryPolicy
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.reader_api.adapter import ReaderApiAdapter
from driftgauge.stores.reader_api.settings import ReaderApiStore
from tests.integration.conftest import OS_URL
from tests.integration.kind_checks import (
    BERLIN,
    END,
    EXAMPLES,
    START,
    Order,
    assert_berlin_days,
    example_text,
    found,
    make_orders,
    orders_database,
    orders_index,
    run_check,
    totals,
)
from tests.integration.reader_service import TOKEN, Behaviour, ReaderService, make_app
from tests.integration.runs import opened

pytestmark = pytest.mark.integration

EXAMPLE = EXAMPLES / "reader_api.yml"
PAGE = 25
STORE = "storefront_api"
FAST = RetryPolicy(attempts=3, base=0.01, cap=0.02, reserve=0.0)
"""Retries short enough for a test that fails every try."""


def _orders() -> list[Order]:
    """The shared 120 orders, o077's status one the API's own filter hides."""
    return [(k, "internal" if k == "o077" else s, a, t) for k, s, a, t in make_orders()]


def _index(orders: list[Order]) -> list[Order]:
    """The index behind the API: o030 missing, y001 extra, o040 changed, o060 twice."""
    by = {o[0]: o for o in orders}
    rows = [(k, "lost" if k == "o040" else s, a, t) for k, s, a, t in orders if k != "o030"]
    return [*rows, ("y001", "paid", Decimal("1.00"), by["o005"][3]), by["o060"]]


@dataclass
class Setup:
    text: str
    behaviour: Behaviour
    served: list[str]
    """The keys the service serves, in its order (hidden rows left out)."""

    def config(self, **store: object) -> Config:
        """Return the example's config, its store settings changed by `store`."""
        config = load_text(self.text, source=str(EXAMPLE))
        if store:
            check = config.checks["orders_api"]
            api = check.reader.store
            assert isinstance(api, ReaderApiStore)
            reader = replace(check.reader, store=replace(api, **store))  # type: ignore[arg-type]
            config.checks["orders_api"] = replace(check, reader=reader)
        return config


@pytest.fixture(scope="module")
def service_behaviour() -> Behaviour:
    return Behaviour()


@pytest.fixture(scope="module")
async def setup(service_behaviour: Behaviour) -> AsyncIterator[Setup]:
    """Fill a PostgreSQL database and an index, serve the index, load the example."""
    orders = _orders()
    docs = _index(orders)
    async with orders_database(orders) as dsn, orders_index(OS_URL, docs) as index:
        service = ReaderService(make_app(OS_URL, index, service_behaviour))
        service.start()
        try:
            text = example_text(
                EXAMPLE,
                dsn,
                ("http://127.0.0.1:8080", service.url),
                ("env:STOREFRONT_TOKEN", TOKEN),
            )
            served = sorted(k for k, s, _, _ in docs if s != "internal")
            yield Setup(text, service_behaviour, served)
        finally:
            service.stop()


@pytest.fixture
def behaviour(setup: Setup) -> Iterator[Behaviour]:
    """Yield the service's behaviour, restored after the test."""
    yield setup.behaviour
    setup.behaviour.skip_page = None
    setup.behaviour.fail_status = None
    setup.behaviour.delay = 0.0
    setup.behaviour.flaky_page, setup.behaviour.flaky_failures = None, 0
    setup.behaviour.keyless_row = None


async def _run(config: Config) -> RunResult:
    """Reconcile the example's check over the two Berlin days."""
    return await run_check(config, "orders_api")


async def _digest_error(
    reader: StoreAdapter, error: type[Exception], match: str | None = None
) -> pytest.ExceptionInfo[Exception]:
    """Assert digesting the two Berlin days raises `error`; close the reader; return the error."""
    try:
        with pytest.raises(error, match=match) as caught:
            await reader.bucket_digests(START, END, "day")
    finally:
        await reader.close()
    return caught


async def _fast_reader(setup: Setup) -> ReaderApiAdapter:
    """Open the example's reader with retries short enough for a test that fails every try."""
    reader = await open_adapter(setup.config().checks["orders_api"].reader)
    assert isinstance(reader, ReaderApiAdapter)
    reader.retry = FAST
    return reader


PAGINGS: dict[str, dict[str, object]] = {
    "cursor": {},
    "page": {"paging": "page", "first_page": 1},
    "offset": {"paging": "offset", "offset_param": "cursor"},
}
"""The service's cursor is an offset, so one service answers all three styles."""


@pytest.mark.parametrize("paging", list(PAGINGS))
async def test_postgres_to_reader_api_finds_the_planted_rows(setup: Setup, paging: str) -> None:
    result = await _run(setup.config(**PAGINGS[paging]))
    assert_berlin_days(result)
    # o077 is in the index but the API's own filter hides it: missing, as its reader sees.
    assert found(result) == {
        "missing": {"o030", "o077"},
        "extra": {"y001"},
        "mismatched": {"o040", "o060"},
    }
    assert totals(result) == (2, 1, 2, 1)
    assert sum(b.visible for b in result.buckets) == len(set(setup.served))


async def test_a_skipped_page_is_found_as_missing(setup: Setup, behaviour: Behaviour) -> None:
    behaviour.skip_page = 2
    result = await _run(setup.config())
    skipped = set(setup.served[2 * PAGE : 3 * PAGE])
    assert len(skipped) == PAGE - 1 and "o060" in skipped  # both of its copies skipped
    assert result.error is None, result.error
    assert found(result)["missing"] == {"o030", "o077"} | skipped
    assert sum(b.missing for b in result.buckets) == 2 + len(skipped)


async def test_more_rows_than_the_cap_is_an_error_naming_it(setup: Setup) -> None:
    result = await _run(setup.config(max_rows=60))
    assert result.error is not None and "max_rows=60" in result.error
    assert all(b.status != "ok" for b in result.buckets)


async def test_a_window_longer_than_the_bound_is_refused(setup: Setup) -> None:
    config = setup.config(max_window_days=1)
    check = config.checks["orders_api"]
    reader = await open_adapter(check.reader)
    await _digest_error(reader, StoreQueryError, match="max_window_days=1")


async def test_a_missing_field_path_is_named_by_the_preflight(setup: Setup) -> None:
    config = setup.config()
    check = config.checks["orders_api"]
    view = replace(check.reader, columns=("attributes.status", "attributes.price"))
    reader = await open_adapter(view)
    await _digest_error(reader, StoreQueryError, match=r"'attributes\.price'")


async def test_a_wrong_rows_path_is_named(setup: Setup) -> None:
    config = setup.config(rows_path="data.rows")
    reader = await open_adapter(config.checks["orders_api"].reader)
    await _digest_error(reader, StoreQueryError, match=r"rows_path 'data\.rows' holds nothing")


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"bearer": None}, StorePermissionError, "HTTP 401"),
        (
            {"url": "http://127.0.0.1:1/v1/orders?from={start}&to={end}"},
            StoreUnavailable,
            "cannot reach the API",
        ),
    ],
)
async def test_http_failures_map_to_store_errors(
    setup: Setup, change: dict[str, object], error: type[Exception], match: str
) -> None:
    reader = await open_adapter(setup.config(**change).checks["orders_api"].reader)
    await _digest_error(reader, error, match=match)


async def test_a_server_error_is_unavailable(setup: Setup, behaviour: Behaviour) -> None:
    behaviour.fail_status = 503
    reader = await _fast_reader(setup)
    await _digest_error(reader, StoreUnavailable, match="HTTP 503")


async def test_a_page_that_fails_once_is_retried_and_the_run_succeeds(
    setup: Setup, behaviour: Behaviour
) -> None:
    clean = totals(await _run(setup.config()))
    behaviour.flaky_page, behaviour.flaky_failures = 2, 1
    before = retries.retry_counts().get((STORE, "unavailable"), 0)
    result = await _run(setup.config())
    assert result.error is None, result.error
    assert totals(result) == clean
    assert behaviour.flaky_failures == 0  # the planted failure was served
    assert retries.retry_counts().get((STORE, "unavailable"), 0) == before + 1


async def test_a_page_that_always_fails_names_the_store_and_status(
    setup: Setup, behaviour: Behaviour
) -> None:
    behaviour.flaky_page, behaviour.flaky_failures = 2, 1_000
    before = retries.retry_counts().get((STORE, "unavailable"), 0)
    reader = await _fast_reader(setup)
    caught = await _digest_error(reader, StoreUnavailable)
    text = str(caught.value)
    assert text.startswith(f"{STORE}: page 2 of ") and "HTTP 500" in text, text
    assert f"gave up after {FAST.attempts} attempts" in text
    assert retries.retry_counts()[(STORE, "unavailable")] == before + FAST.attempts - 1


async def test_a_throttled_page_is_retried_and_counted_as_throttled(
    setup: Setup, behaviour: Behaviour
) -> None:
    behaviour.fail_status = 429
    before = retries.retry_counts().get((STORE, "throttled"), 0)
    reader = await _fast_reader(setup)
    await _digest_error(reader, StoreUnavailable, match="HTTP 429")
    assert retries.retry_counts()[(STORE, "throttled")] == before + FAST.attempts - 1


async def test_a_row_without_its_key_is_an_error_naming_page_and_row(
    setup: Setup, behaviour: Behaviour
) -> None:
    behaviour.keyless_row = PAGE + 3  # the fourth row of the second page
    reader = await open_adapter(setup.config().checks["orders_api"].reader)
    caught = await _digest_error(reader, StoreQueryError)
    text = str(caught.value)
    assert text.startswith(f"{STORE}: page 2 of http://127.0.0.1:"), text
    assert f"(cursor={PAGE})" in text and "row 3" in text and "'id'" in text, text


async def test_an_api_that_does_not_answer_in_time_is_a_timeout(
    setup: Setup, behaviour: Behaviour
) -> None:
    behaviour.delay = 1.5
    reader = await open_adapter(setup.config(timeout=0.3).checks["orders_api"].reader)
    await _digest_error(reader, StoreTimeout, match="no answer within the timeout")


async def test_the_rate_limit_spaces_the_requests(setup: Setup, behaviour: Behaviour) -> None:
    reader = await open_adapter(setup.config(rate_limit=10.0).checks["orders_api"].reader)
    before = behaviour.requests
    began = time.monotonic()
    try:
        await reader.bucket_digests(START, END, "day")
    finally:
        await reader.close()
    pages = behaviour.requests - before
    assert pages == 5  # 120 served rows, 25 a page
    assert time.monotonic() - began >= (pages - 1) / 10.0


async def test_measure_totals_are_the_served_rows_exact_sums(setup: Setup) -> None:
    check = setup.config().checks["orders_api"]
    view = replace(check.reader, measures=("amount",))
    async with opened(view) as reader:
        days = await reader.bucket_digests(START, END, "day")
    want: dict[datetime, Decimal] = {}
    for _, s, a, t in _index(_orders()):
        if s != "internal":
            day = t.astimezone(BERLIN).replace(hour=0, minute=0, second=0).astimezone(UTC)
            want[day] = want.get(day, Decimal(0)) + a
    assert {b.start: (b.agg.measures or {})["amount"] for b in days} == want
