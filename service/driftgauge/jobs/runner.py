"""Run one check over a window and record it: begin, reconcile, complete or fail."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

from driftgauge import budget, observe
from driftgauge.config.frozen import Check
from driftgauge.core.clock import utc_now
from driftgauge.core.errors import DriftgaugeError, StateError, StoreError
from driftgauge.encoding import digest
from driftgauge.engine.reconcile import Progress, reconcile
from driftgauge.engine.result import RunResult
from driftgauge.jobs.adapters import Adapters, AdapterSource
from driftgauge.jobs.first_pass import first_pass_plan
from driftgauge.logs import log_context
from driftgauge.state.store import KeyHasher, StateStore

log = logging.getLogger("driftgauge.runner")
ExclusionSource = Callable[[Check, datetime, datetime], Awaitable[Mapping[str, str]]]
"""Return key → reason for keys the sync job reported it did not write (the run ledger)."""


def key_hasher(check: Check) -> KeyHasher:
    """Return the function that gives a key's hash as the check's stores compute it."""

    def hashed(key: str) -> str | None:
        try:
            types: digest.KeyTypes = check.key_types or check.key_type
            return digest.key_hash(digest.key_encoding(digest.key_from_text(key, types), types))
        except (ValueError, TypeError):  # JSONDecodeError is a ValueError
            return None

    return hashed


def canonical_keys(check: Check, excused: Mapping[str, str]) -> Mapping[str, str]:
    """Return the ledger's excused keys with a composite key's text in canonical form.

    A sync job may report `["c1", 7]` where the stores' key text is `["c1",7]`; a key
    that is no array of the check's parts can match no row and is dropped.
    """
    if not check.key_types:
        return excused
    out: dict[str, str] = {}
    for key, reason in excused.items():
        try:
            out[digest.key_text(digest.key_from_text(key, check.key_types))] = reason
        except (ValueError, TypeError):
            continue
    return out


async def _attempt(
    check: Check,
    adapters: AdapterSource,
    state: StateStore,
    window_start: datetime,
    window_end: datetime,
    *,
    now: datetime,
    sample_keys: int,
    deadline: float | None,
    exclusions: ExclusionSource | None,
    progress: Progress | None,
    slots_first: bool | None,
) -> RunResult:
    """Plan and reconcile the window within the run's deadline; a failure is a failed result.

    A cancellation (shutdown) is not caught: the caller records it and lets it propagate.
    """
    try:
        async with budget.run_timeout(deadline):  # retries in the stores see it too
            sides = adapters if isinstance(adapters, Adapters) else await adapters()
            excused = (
                canonical_keys(check, await exclusions(check, window_start, window_end))
                if exclusions is not None
                else None
            )
            first = await first_pass_plan(
                state, check, (sides.source, sides.reader), window_start, window_end, slots_first
            )
            return await reconcile(
                check,
                sides.source,
                sides.reader,
                window_start,
                window_end,
                now=now,
                sample_keys=sample_keys,
                ledger_excluded=excused,
                progress=progress,
                first=first,
            )
    except TimeoutError:
        why = f"the run exceeded its deadline of {deadline:g}s"
        return _failed(check, window_start, window_end, now, why)
    except DriftgaugeError as exc:
        result = _failed(check, window_start, window_end, now, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, StoreError):
            # Opening a side or its preflight failed: count it as any store call is.
            result.failed_store = exc.store
        return result
    except Exception as exc:
        # A bug must fail this run, not the scheduler that owns it.
        log.exception("run crashed")
        why = f"internal error: {type(exc).__name__}: {exc}"
        return _failed(check, window_start, window_end, now, why)


async def run_check(
    check: Check,
    adapters: AdapterSource,
    state: StateStore,
    window_start: datetime,
    window_end: datetime,
    *,
    trigger: str,
    now: datetime,
    sample_keys: int = 100,
    deadline: float | None = None,
    key_hash: KeyHasher | None = None,
    exclusions: ExclusionSource | None = None,
    progress: Progress | None = None,
    slots_first: bool | None = None,
    run_id: int | None = None,
) -> RunResult:
    """Reconcile the window as a run and record how it ended; return the result.

    `run_id` is a run the caller already began (a claimed tick, a manual run whose id it
    handed out); None begins one. `slots_first` None lets the stored results decide (see
    expects_drift and first_pass_plan).

    Store failures, a missed deadline and internal errors all end as a failed run; a
    cancellation (shutdown) fails the run too, then propagates. A run is only ever marked
    complete together with its buckets.
    """
    if run_id is None:
        run_id = await state.begin_run(
            check.name, window_start, window_end, trigger=trigger, started_at=now
        )
    clock = time.monotonic()
    try:
        with log_context(check=check.name, run_id=run_id):
            log.info(
                "run started",
                extra={
                    "window_start": window_start.isoformat(),
                    "window_end": window_end.isoformat(),
                },
            )
            try:
                result = await _attempt(
                    check,
                    adapters,
                    state,
                    window_start,
                    window_end,
                    now=now,
                    sample_keys=sample_keys,
                    deadline=deadline,
                    exclusions=exclusions,
                    progress=progress,
                    slots_first=slots_first,
                )
            except asyncio.CancelledError:
                observe.run_finished(check.name, trigger, time.monotonic() - clock)
                await _shielded_fail(
                    state, run_id, "the service shut down mid-run", time.monotonic() - clock
                )
                raise
            result.finished_at = result.finished_at or utc_now()
            result.run_id = run_id
            duration = time.monotonic() - clock
            observe.run_finished(check.name, trigger, duration)
            hasher = key_hash or key_hasher(check)
            await _record(state, run_id, result, duration, sample_keys, hasher)
        return result
    finally:
        # Recorded or not, this process stops renewing the run's lease: a run it could
        # not record expires as interrupted instead of staying `running` for good.
        state.owned.discard(run_id)


async def _record(
    state: StateStore,
    run_id: int,
    result: RunResult,
    duration: float,
    sample_keys: int,
    key_hash: KeyHasher,
) -> None:
    """Store the run as complete with its buckets, or as failed; log how it finished."""
    if result.error is None:
        await state.complete_run(
            run_id, result, duration=duration, sample_keys=sample_keys, key_hash=key_hash
        )
    else:
        await state.fail_run(
            run_id,
            result.error,
            finished_at=result.finished_at,
            duration=duration,
            queries=result.queries,
            rows_fetched=result.rows_fetched,
        )
    # A run that failed is the operator's business: a store down, a deadline missed.
    log.log(
        logging.INFO if result.error is None else logging.WARNING,
        "run finished",
        extra={
            "status": result.status,
            "error": result.error,
            "store": result.failed_store,
            "duration_seconds": round(duration, 3),
            "queries": result.queries,
            "rows_scanned": result.rows_scanned,
            "drift": sum(b.drift for b in result.buckets),
        },
    )


def _failed(check: Check, start: datetime, end: datetime, now: datetime, error: str) -> RunResult:
    return RunResult(check.name, start, end, started_at=now, error=error)


async def _shielded_fail(state: StateStore, run_id: int, reason: str, duration: float) -> None:
    """Record a cancelled run as interrupted, even though our own task is being cancelled."""
    task = asyncio.ensure_future(
        state.leases.interrupt(run_id, reason, finished_at=utc_now(), duration=duration)
    )
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        # Cancelled again while waiting: give the write a bounded moment to land rather
        # than abandoning it half-way.
        await asyncio.wait({task}, timeout=5)
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.warning(
                "could not record the cancelled run", extra={"error": str(task.exception())}
            )
    except StateError as exc:
        log.warning("could not record the cancelled run", extra={"error": str(exc)})
