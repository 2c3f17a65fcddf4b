"""Whether a run's first scan pays for slots: the stored verdicts of its days decide."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from driftgauge.config.runtime import Check
from driftgauge.core.errors import DriftgaugeError
from driftgauge.state.store import StateStore

log = logging.getLogger("driftgauge.runner")


async def expects_drift(
    state: StateStore, check: Check, window_start: datetime, window_end: datetime
) -> bool:
    """Return True when drift is likely in the window, so slots pay in the first scan.

    Likely means: the latest stored verdict of some day in the window is drift (drift
    stays until someone repairs it), or no day of the window was ever judged (a new check
    meeting old history). A window whose judged days were all healthy takes days only, so
    a healthy check's hourly runs never pay for slots. An unreadable history only costs
    speed, never the run.
    """
    tz = check.timezone
    first = window_start.astimezone(tz).date()
    last = (window_end - timedelta(microseconds=1)).astimezone(tz).date()
    try:
        stored = await state.day_buckets(check.name, first, last, tz)
    except DriftgaugeError as exc:
        log.warning(
            "could not read earlier results; first pass without slots", extra={"error": str(exc)}
        )
        return False
    judged = [b for b in stored if b.bucket.status in ("ok", "drift")]
    return not judged or any(b.bucket.status == "drift" for b in judged)
