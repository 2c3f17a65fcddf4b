"""Each fault in front of a real store ends with the exact counts or an `error` naming it."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import datetime
from typing import Any

import pytest

from driftgauge import observe
from driftgauge.canary.probe import run_canary
from driftgauge.config.frozen import Canary
from driftgauge.stores import retries
from tests.faults.conftest import (
    EXTRA,
    MISMATCHED,
    MISSING,
    NOW,
    STORE_TIMEOUT,
    World,
    counts,
)
from tests.faults.proxy import Fault
from tests.integration.conftest import unique_name

pytestmark = pytest.mark.integration

KINDS = {
    "StoreTimeout": "timeout",
    "StoreUnavailable": "unavailable",
    "StorePermissionError": "permission",
}
"""driftgauge_store_errors_total's kind per exception; the rest are `query`."""
SEARCH = r"_search(\?|$)"
READS = r"^(GET|POST) "
"""Every read; a PIT's deletion is not one (it is never retried, its failure ignored)."""


async def baseline(world: World) -> list[tuple[Any, ...]]:
    """Return the counts of a run without faults (computed once per module)."""
    if world.baseline is None:
        world.os.arm()
        result, _ = await world.reconcile()
        assert result.error is None, result.error
        world.baseline = counts(result)
    return list(world.baseline)


async def test_without_faults_the_run_finds_exactly_the_planted_drift(world: World) -> None:
    found = await baseline(world)
    named = {key: kind for *_, samples in found for key, kind in samples}
    assert named == (
        {k: "missing" for k in MISSING}
        | {k: "mismatched" for k in MISMATCHED}
        | {k: "extra" for k in EXTRA}
    )
    assert [
        (day, expected, missing, extra, mismatched)
        for day, _, expected, _, missing, extra, mismatched, *_ in found
    ] == [("2024-05-06", 600, 2, 0, 0), ("2024-05-07", 600, 1, 1, 1), ("2024-05-08", 600, 1, 0, 1)]
    assert world.os.injected() == 0 and len(world.os.seen) > 5


def _retried(store: str, reason: str) -> int:
    return retries.retry_counts().get((store, reason), 0)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Fault("status", share=0.3, match=READS, status=429, cause="queue"), "throttled"),
        (Fault("status", share=0.3, match=READS, status=429, cause="breaker"), "throttled"),
        (
            Fault("status", share=0.3, match=READS, status=429, cause="scroll", retry_after="1"),
            "throttled",
        ),
        (Fault("status", share=0.3, match=READS, status=503, cause="unavailable"), "unavailable"),
        (Fault("reset", share=0.3, match=READS), "connection"),
        (Fault("truncate", share=0.3, match=READS), "unreadable"),
    ],
    ids=["429-queue", "429-breaker", "429-scroll-retry-after", "503", "reset", "truncate"],
)
async def test_transient_faults_are_retried_to_the_exact_counts(
    world: World, fault: Fault, reason: str
) -> None:
    want = await baseline(world)
    before = _retried("dst", reason)
    world.os.arm(fault)
    result, _ = await world.reconcile()
    hit = world.os.injected(fault.kind)
    assert hit > 0
    assert result.error is None, result.error
    assert counts(result) == want
    assert _retried("dst", reason) - before == hit


async def test_retry_after_is_waited_for(world: World) -> None:
    await baseline(world)
    world.os.arm(Fault("status", share=1.0, limit=2, status=429, retry_after="1", match=SEARCH))
    result, _ = await world.reconcile()
    assert result.error is None, result.error
    seen = world.os.seen
    faulted = [i for i, s in enumerate(seen) if s.fault == "status"]
    assert len(faulted) == 2
    # The retry of a 429 (the next request of the same kind) came at least 1 s later.
    for i in faulted:
        retry = next(s for s in seen[i + 1 :] if s.line.split("?")[0] == seen[i].line.split("?")[0])
        assert retry.at - seen[i].at >= 1.0


async def test_each_retry_logs_the_cause_from_the_error_body(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    await baseline(world)
    world.os.arm(Fault("status", limit=1, status=429, cause="breaker"))
    with caplog.at_level("WARNING", logger="driftgauge.stores.retry"):
        result, _ = await world.reconcile()
    assert result.error is None, result.error
    [record] = [r for r in caplog.records if r.name == "driftgauge.stores.retry"]
    assert record.__dict__["error_type"] == "circuit_breaking_exception"
    assert "Data too large" in record.__dict__["error_reason"]
    assert record.__dict__["status"] == 429 and record.__dict__["store"] == "dst"


async def _fails(world: World, error: str, *parts: str, within: float = 30.0) -> str:
    """Run once and check it ended `error` with that exception, naming each part.

    The failing store's calls, and only those, count in driftgauge_store_errors_total.
    """
    name, store = (p.strip() for p in error.split(":")[:2])
    kind = KINDS.get(name, "query")
    before = observe.error_counts()
    result, elapsed = await world.reconcile()
    assert result.status == "error", counts(result)
    assert result.error is not None
    assert result.error.startswith(error), result.error
    assert result.failed_store == store
    after = observe.error_counts()
    # Calls of other days failing the same way at the same moment count too.
    grown = {k for k, n in after.items() if n != before.get(k, 0)}
    assert grown == {(store, kind)}, (after, before)
    for part in parts:
        assert part in result.error, result.error
    assert elapsed < within, elapsed
    [latest] = (await world.state.runs("items"))[:1]
    assert latest.status == "error" and latest.error == result.error
    return result.error


@pytest.mark.parametrize(
    ("fault", "error", "parts"),
    [
        (
            Fault("status", status=429, cause="queue"),
            "StoreUnavailable: dst: ",
            (
                "429",
                "es_rejected_execution_exception",
                "queue capacity",
                "gave up after 5 attempts",
            ),
        ),
        (
            Fault("status", status=429, cause="scroll"),
            "StoreUnavailable: dst: ",
            ("429", "too many scroll contexts", "gave up after 5 attempts"),
        ),
        (
            Fault("status", status=503, cause="unavailable"),
            "StoreUnavailable: dst: ",
            ("503", "cluster_manager_not_discovered_exception", "gave up after 5 attempts"),
        ),
        (Fault("reset"), "StoreUnavailable: dst: ", ("cannot connect", "gave up after 5 attempts")),
        (Fault("truncate"), "StoreQueryError: dst: ", ("unreadable", "gave up after 5 attempts")),
    ],
    ids=["429-queue", "429-scroll", "503", "reset", "truncate"],
)
async def test_persistent_faults_end_in_error_naming_store_and_cause(
    world: World, fault: Fault, error: str, parts: tuple[str, ...]
) -> None:
    await baseline(world)
    world.os.arm(fault)
    await _fails(world, error, *parts, within=15.0)


async def test_a_retry_after_beyond_what_we_wait_fails_at_once(world: World) -> None:
    await baseline(world)
    world.os.arm(Fault("status", status=429, retry_after="3600"))
    await _fails(world, "StoreUnavailable: dst: ", "429", "Retry-After 3600s", within=2.0)
    assert world.os.injected() == 1


async def test_retries_stop_inside_the_run_deadline(world: World) -> None:
    await baseline(world)
    world.os.arm(Fault("status", status=503, cause="unavailable"))
    result, elapsed = await world.reconcile(deadline=2.0)
    assert result.error is not None and result.error.startswith("StoreUnavailable: dst: ")
    assert "the run's deadline leaves" in result.error
    assert elapsed < 2.0


async def test_a_hung_reader_ends_in_a_timeout_within_the_store_timeout(world: World) -> None:
    await baseline(world)
    world.os.arm(Fault("hang"))
    await _fails(
        world, "StoreTimeout: dst: ", "no answer within the timeout", within=STORE_TIMEOUT + 2
    )
    assert world.os.injected() == 1  # a timeout is not retried


async def test_a_refused_reader_ends_in_error(world: World) -> None:
    await baseline(world)
    await world.os.refuse()
    try:
        await _fails(
            world,
            "StoreUnavailable: dst: ",
            "cannot connect",
            "gave up after 5 attempts",
            within=15.0,
        )
    finally:
        await world.os.start()


@pytest.mark.parametrize(
    "match",
    [
        r"_search\?",
        r"point_in_time",
    ],
    ids=["search", "point-in-time"],
)
async def test_a_failed_shard_is_never_a_smaller_answer(world: World, match: str) -> None:
    await baseline(world)
    world.os.arm(Fault("failed_shard", match=match))
    await _fails(
        world,
        "StoreQueryError: dst: ",
        "1 of 3 shards failed",
        "node_disconnected_exception",
        "partial answer refused",
    )


async def test_the_point_in_time_is_asked_not_to_be_partial(world: World) -> None:
    await baseline(world)
    result, _ = await world.reconcile()
    assert result.error is None
    pits = [
        s.line for s in world.os.seen if s.line.startswith("POST ") and "point_in_time" in s.line
    ]
    assert pits and all("allow_partial_pit_creation=false" in line for line in pits)


async def test_a_page_search_failing_one_shard_ends_in_error(world: World) -> None:
    await baseline(world)
    # PIT pages are searches without an index in the path.
    world.os.arm(Fault("failed_shard", match=r"^POST /_search\?"))
    await _fails(world, "StoreQueryError: dst: ", "export rows", "shards failed")


async def test_a_timed_out_search_is_refused(world: World) -> None:
    await baseline(world)
    world.os.arm(Fault("timed_out", match=SEARCH))
    await _fails(world, "StoreTimeout: dst: ", "shards timed out")


async def test_a_page_short_of_one_hit_ends_in_an_incomplete_export(world: World) -> None:
    await baseline(world)
    world.os.arm(Fault("drop_hit", match=r"^POST /_search\?"))
    await _fails(world, "IncompleteExport: dst: ", "export received")


async def test_a_refused_source_ends_in_error(world: World) -> None:
    await baseline(world)
    await world.pg.refuse()
    try:
        await _fails(world, "StoreUnavailable: src: ", "connect", within=STORE_TIMEOUT + 2)
    finally:
        await world.pg.start()


SOURCE_FAULTS = pytest.mark.parametrize(
    ("mode", "error", "part"),
    [
        ("hang", "StoreTimeout: src: ", "no answer within the timeout"),
        ("reset", "StoreUnavailable: src: ", "cannot use the connection"),
    ],
)
"""The source proxy's faults and the error each ends the run in."""


@SOURCE_FAULTS
async def test_a_source_failing_at_connect_ends_in_error(
    world: World, mode: str, error: str, part: str
) -> None:
    await baseline(world)
    world.pg.set_mode(mode)  # type: ignore[arg-type]
    await _fails(world, error, part, within=STORE_TIMEOUT + 2)


@SOURCE_FAULTS
async def test_a_source_failing_mid_query_ends_in_error(
    world: World, mode: str, error: str, part: str
) -> None:
    await baseline(world)
    sides = await world.adapters()
    world.pg.set_mode(mode)  # type: ignore[arg-type]
    result, elapsed = await world.reconcile(sides)
    assert result.error is not None and result.error.startswith(error), result.error
    assert part in result.error
    assert elapsed < STORE_TIMEOUT + 2


async def test_after_every_fault_a_clean_run_finds_the_same_counts(world: World) -> None:
    want = await baseline(world)
    result, _ = await world.reconcile()
    assert counts(result) == want


async def test_a_failed_run_leaves_no_store_call_running(world: World) -> None:
    await baseline(world)
    # The day digests fail on one day while the other days' calls are under way.
    world.os.arm(Fault("timed_out", match=SEARCH, share=0.5))
    result, _ = await world.reconcile()
    assert result.status == "error"
    after = len(world.os.seen)
    await asyncio.sleep(1.0)
    assert world.os.seen[after:] == []


async def test_a_canary_write_answered_429_is_not_retried(world: World) -> None:
    await baseline(world)
    check = world.config.checks["items"]
    canary = Canary(
        store=check.reader.store,
        index=unique_name("dg_faults_canary"),
        document={},
        timeout=STORE_TIMEOUT,
    )
    with_canary = dataclasses.replace(check, canary=canary)
    world.os.arm(Fault("status", status=429, cause="queue", match=r"/_(doc|update)/"))

    async def pick(start: datetime, end: datetime) -> str:
        return "k0-0001"

    result = await run_canary(with_canary, pick, now=NOW)
    world.os.disarm()
    assert result.result == "error" and "HTTP 429" in result.detail, result.detail
    writes = [s for s in world.os.seen if re.search(r"^(PUT|POST) .*/_(doc|update)/", s.line)]
    assert len(writes) == 1  # written once, whatever the cluster answered


async def test_a_canary_read_back_missing_a_shard_is_an_error_not_a_verdict(world: World) -> None:
    await baseline(world)
    check = world.config.checks["items"]
    canary = Canary(
        store=check.reader.store,
        index=str(check.reader.index),
        document={"label": "canary"},
        timeout=STORE_TIMEOUT,
    )
    hiding = {"bool": {"must_not": [{"exists": {"field": canary.marker}}]}}
    with_canary = dataclasses.replace(
        check, canary=canary, reader=dataclasses.replace(check.reader, filter=hiding)
    )
    world.os.arm(Fault("failed_shard", match=SEARCH))

    async def pick(start: datetime, end: datetime) -> str:
        return "k0-0001"

    result = await run_canary(with_canary, pick, now=NOW)
    world.os.disarm()
    assert result.result == "error", result
    assert "1 of 3 shards failed" in result.detail and "partial answer refused" in result.detail
