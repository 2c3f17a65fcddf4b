"""One scheduled tick, traced call by call, never climbs from a layer to one above it.

A profile hook sees every call whose caller and callee are both driftgauge modules and
maps each module to its layer in .importlinter (the contract the imports keep); a call into
a higher layer (a callback handed down, a lower module reaching back up) is a climb.
"""

from __future__ import annotations

import asyncio
import collections
import configparser
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from driftgauge.config.frozen import Config
from driftgauge.state.store import StateStore
from tests.integration import test_ticks as ticks
from tests.integration.service_helpers import Clock, make_config, schema_name
from tests.integration.state_helpers import memory_runner

pytestmark = pytest.mark.integration
CONTRACT = Path(__file__).parents[2] / ".importlinter"


def _layers() -> dict[str, int]:
    """Return each package of the layers contract and its height (0 is the lowest)."""
    cp = configparser.ConfigParser()
    cp.read(CONTRACT)
    rows = [r.strip() for r in cp["importlinter:contract:layers"]["layers"].splitlines()]
    return {
        m.strip(): height
        for height, row in enumerate(reversed([r for r in rows if r]))
        for m in row.replace(":", "|").split("|")
    }


LAYERS = _layers()


def layer_of(module: str) -> str | None:
    """Return the layer package holding `module` (its longest prefix in the contract)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return ".".join(parts[:n])
    return None


class Trace:
    """The layer-to-layer calls seen, and those into a higher layer."""

    def __init__(self) -> None:
        self.edges: collections.Counter[tuple[str, str]] = collections.Counter()
        self.climbs: collections.Counter[str] = collections.Counter()

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        a = layer_of(frame.f_back.f_globals.get("__name__", ""))
        b = layer_of(frame.f_globals.get("__name__", ""))
        if a is None or b is None or a == b:
            return
        self.edges[(a, b)] += 1
        if LAYERS[b] > LAYERS[a]:
            caller = frame.f_back.f_globals["__name__"]
            self.climbs[f"{caller} -> {frame.f_globals['__name__']}.{frame.f_code.co_name}"] += 1


@contextmanager
def traced() -> Iterator[Trace]:
    """Trace the calls made in this thread inside the block."""
    trace = Trace()
    sys.setprofile(trace)
    try:
        yield trace
    finally:
        sys.setprofile(None)


def test_the_trace_sees_a_lower_layer_calling_a_higher_one() -> None:
    # A function run as if defined in a store kind calls into the job runtime: a climb.
    from driftgauge.jobs import schedule

    fake: dict[str, Any] = {"__name__": "driftgauge.stores.fake", "schedule": schedule}
    fake["delta"] = timedelta(minutes=5)
    exec("def reach_up():\n    return schedule.every(delta)", fake)
    with traced() as trace:
        fake["reach_up"]()
    assert any(c.startswith("driftgauge.stores.fake -> driftgauge.jobs") for c in trace.climbs)


async def test_a_scheduled_tick_only_descends(pg_database: str) -> None:
    config: Config = make_config(pg_database, schema_name())
    store = await StateStore.open(config.state, replica="trace")
    try:
        adapters, _ = ticks.sides()
        clock = Clock(ticks.T0)
        runner = memory_runner(config, store, adapters, clock)
        runtime = ticks.scheduler(config, runner.tick, clock)
        clock.now = ticks.T0 + timedelta(hours=1)
        with traced() as trace:
            out = await runtime.run_due(clock.now)
        await asyncio.sleep(0)
    finally:
        await store.close()
    assert out == {"orders:recent": "ran:ok", "reviews:recent": "ran:drift"}
    # The trace saw the whole path: runtime -> engine -> store kind, and the state database.
    for edge in [
        ("driftgauge.jobs", "driftgauge.engine"),
        ("driftgauge.engine", "driftgauge.stores"),
        ("driftgauge.jobs", "driftgauge.state"),
        ("driftgauge.state", "driftgauge.pg"),
    ]:
        assert trace.edges[edge] > 0, (edge, trace.edges)
    assert not trace.climbs, trace.climbs
