"""Background loops survive one bad item: each unexpected failure is logged, counted, skipped."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric

log = logging.getLogger("driftgauge.background")
LOOPS = (
    "audit",
    "snapshot_refresh",
    "retention",
    "canary",
    "signals",
    "ledger_deadlines",
    "ledger_reconcile",
    "ticks",
    "heartbeat",
    "repair",
    "exporter",
)
# One process serves one app, so a process-wide tally is the service's tally.
_errors: dict[str, int] = dict.fromkeys(LOOPS, 0)


def errors(loop: str) -> int:
    """Return how many items of `loop` failed unexpectedly since the process started."""
    return _errors[loop]


@contextmanager
def survive(loop: str, item: str, **fields: Any) -> Iterator[None]:
    """Run one item of a background loop; an unexpected exception is logged and counted.

    Expected failures (a store or the state database down) are handled by the caller
    before they reach here; what arrives is a bug or malformed data, so the line carries
    the stack for the operator and the loop goes on with the next item.
    """
    try:
        yield
    except Exception as exc:
        _errors[loop] += 1
        log.error(
            "background item failed",
            exc_info=True,
            extra={"loop": loop, "item": item, "error": f"{type(exc).__name__}: {exc}", **fields},
        )


def background_part() -> Iterable[Metric]:
    """Yield driftgauge_background_errors_total, one series per background loop."""
    # Labelled `loop`, not `job`: Prometheus's own `job` label would shadow it.
    fam = CounterMetricFamily(
        "driftgauge_background_errors",
        "Items a background loop skipped after an unexpected error.",
        labels=["loop"],
    )
    for loop in LOOPS:
        fam.add_metric([loop], _errors[loop])
    yield fam
