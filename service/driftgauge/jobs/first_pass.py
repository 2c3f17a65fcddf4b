"""Whether a run's first scan pays for slots: the stored verdicts of its days decide."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from driftgauge.config.frozen import Check
from driftgauge.core.errors import DriftgaugeError
from driftgauge.encoding import iblt, sizing
from driftgauge.engine import cost, plan
from driftgauge.engine.result import BucketResult
from driftgauge.engine.sides import utc
from driftgauge.engine.strategy import FirstPass
from driftgauge.state.codec import StoredBucket
from driftgauge.state.store import StateStore
from driftgauge.stores.base import DigestFirstPass, StoreAdapter

log = logging.getLogger("driftgauge.runner")


async def _stored(
    state: StateStore, check: Check, window_start: datetime, window_end: datetime, instead: str
) -> list[StoredBucket] | None:
    """Return the window's stored day verdicts; None (logged) when they cannot be read."""
    tz = check.timezone
    first = window_start.astimezone(tz).date()
    last = (window_end - timedelta(microseconds=1)).astimezone(tz).date()
    try:
        return await state.day_buckets(check.name, first, last, tz)
    except DriftgaugeError as exc:
        log.warning(f"could not read earlier results; {instead}", extra={"error": str(exc)})
        return None


def expects_drift(stored: list[StoredBucket] | None) -> bool:
    """Return True when drift is likely in the window, so slots pay in the first scan.

    Likely means: the latest stored verdict of some day in the window is drift (drift
    stays until someone repairs it), or no day of the window was ever judged (a new check
    meeting old history). A window whose judged days were all healthy takes days only, so
    a healthy check's hourly runs never pay for slots. An unreadable history (None) only
    costs speed, never the run.
    """
    if stored is None:
        return False
    judged = [b for b in stored if b.bucket.status in ("ok", "drift")]
    return not judged or any(b.bucket.status == "drift" for b in judged)


def digest_width(
    stored: list[StoredBucket] | None, check: Check, window_start: datetime, window_end: datetime
) -> int:
    """Return the difference digests' sub-table width: from the most a stored day differed by.

    A mismatched key is two differing rows (one a side). A day more than a pass's table
    holds does not size it: it is scanned again at its own width. Without a judged day to
    size from, or with unreadable history, a first run's width (see encoding.sizing); a
    day that then differs by more is scanned again at a width its table estimates.
    """
    buckets = [b.bucket for b in stored or []]
    drifts = [_rows(b) for b in stored or []]
    # A day more than a pass's widest table holds is scanned again at its own width
    # (engine.resize): sizing the pass for it would make every day pay for its cells.
    held = [d for d in drifts if iblt.width_for(d) < iblt.MAX_WIDTH]
    width = max(iblt.DEFAULT_WIDTH, iblt.width_for(max(held, default=0)))
    if len(held) < len(drifts):
        width = max(width, sizing.ESTIMATE_WIDTH)
    if not any(b.status in ("ok", "drift") for b in buckets):
        days = len(plan.day_starts(window_start, window_end, check.timezone))
        width = max(width, sizing.first_width(days))
    return width


async def _digest_cost(state: StateStore, check: Check) -> float:
    """Return the digests' cost of the check's slower side as calibrated, else the default.

    Both sides scan at once, so the slower one sets the pass's time. An unreadable
    measure only costs speed, never the run.
    """
    names = [check.source.store.name, check.reader.store.name]
    try:
        measured = await state.costs.digest_pass(names)
    except DriftgaugeError as exc:
        log.warning("could not read the stores' costs; the default", extra={"error": str(exc)})
        return cost.DIGEST_PASS
    return max(measured.get(n, cost.DIGEST_PASS) for n in names)


def drift_of(bucket: BucketResult) -> plan.StoredDrift:
    """Return what a judged day tells the next run's plan: its differing rows and hours.

    A mismatched key (or a duplicated one) is two differing rows, one a side.
    """
    rows = bucket.missing + bucket.extra + 2 * (bucket.mismatched + bucket.duplicates)
    return plan.StoredDrift(rows, tuple(bucket.drift_hours))


def _rows(stored: StoredBucket) -> int:
    """Return the differing rows a stored day held."""
    return drift_of(stored.bucket).rows


async def first_pass_plan(
    state: StateStore,
    check: Check,
    sides: tuple[StoreAdapter, StoreAdapter],
    window_start: datetime,
    window_end: datetime,
    slots_first: bool | None,
) -> FirstPass:
    """Return how a run whose `slots_first` None means decide scans first.

    When drift is likely (see expects_drift) and both sides return difference digests,
    the cost model (engine.cost) picks: digests for every day when the stored drift
    covers so many days that a second pass over them would cost more; else day
    aggregates first, then a scan for digests of only the days that differ (each alone
    while they are few, else one second pass over them). With nothing known (a first
    run) that is day aggregates first: a healthy window then costs the floor. Others
    take slots. A window judged healthy takes days only; its differing days are drilled
    down.
    """
    if slots_first is not None:
        return FirstPass(slots_first, None)
    # One read of the stored verdicts serves every decision below.
    stored = await _stored(state, check, window_start, window_end, "first pass of days only")
    likely = expects_drift(stored)
    if likely and all(isinstance(side, DigestFirstPass) for side in sides):
        days = len(plan.day_starts(window_start, window_end, check.timezone))
        drifted = [b.bucket for b in stored or [] if b.bucket.status == "drift"]
        share = len(drifted) / max(days, 1)
        ratio = await _digest_cost(state, check)
        if stored and cost.digests_first(share, ratio):
            return FirstPass(False, digest_width(stored, check, window_start, window_end))
        # Nothing known, or drift in few enough days: day aggregates first, the floor,
        # then a scan for digests of only the days that differ (engine.second_pass).
        drift = {utc(b.start): drift_of(b) for b in drifted}
        return FirstPass(False, None, rescan=True, day_drift=drift)
    return FirstPass(likely, None)
