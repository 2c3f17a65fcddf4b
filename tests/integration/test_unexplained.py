"""A store whose rows and aggregates disagree ends `error`, never ok: real stores, each
wrapped to drop one row from its leaf listings."""

from __future__ import annotations

from datetime import timedelta

import pytest

from driftgauge.config.frozen import State
from driftgauge.config.secrets import Secret
from driftgauge.engine.live import drill_live
from driftgauge.engine.reconcile import reconcile
from driftgauge.metrics.collector import build_registry, reconciliation_part
from driftgauge.metrics.snapshot import CheckSnapshot
from driftgauge.state.store import StateStore
from driftgauge.stores.base import StoreAdapter
from tests.unit.corrupting import DropOneRow

from .dst_data import CASES
from .runs import adapters
from .service_helpers import schema_name
from .test_dst_buckets import Loaded, loaded

pytestmark = pytest.mark.integration
__all__ = ["loaded"]


@pytest.mark.parametrize("key", ["h3", "h6"], ids=["differing_row", "clean_row"])
@pytest.mark.parametrize("side", ["source", "reader"])
@pytest.mark.parametrize("leaf_rows", [100, 5000], ids=["slots", "rows"])
@pytest.mark.parametrize("reader", ["pg", "os"])
async def test_a_dropped_row_is_an_unexplained_difference(
    loaded: Loaded, reader: str, leaf_rows: int, side: str, key: str
) -> None:
    case = CASES[0]
    check = loaded.config(case, reader, leaf_rows)
    async with adapters(check) as (source, rdr):
        victim = DropOneRow(source if side == "source" else rdr, f"{case.id}-{key}")
        sides: tuple[StoreAdapter, StoreAdapter] = (
            (victim, rdr) if side == "source" else (source, victim)
        )
        start, end = case.span()
        result = await reconcile(check, *sides, start, end, now=end + timedelta(days=1))
    assert victim.dropped == 1
    (bucket,) = result.buckets
    assert bucket.status == "error", bucket.reasons
    assert bucket.reasons[0].startswith("unexplained_difference: ")
    assert result.status == "error"


async def test_an_unexplained_bucket_is_stored_served_and_alarmed(loaded: Loaded) -> None:
    case = CASES[0]
    check = loaded.config(case, "pg", 100)
    start, end = case.span()
    now = end + timedelta(days=1)
    async with adapters(check) as (source, rdr):
        result = await reconcile(
            check, source, DropOneRow(rdr, f"{case.id}-h6"), start, end, now=now
        )
    result.finished_at = now
    state = await StateStore.open(State(Secret(loaded.dsn), schema_name()), deadline=10)
    try:
        run_id = await state.begin_run(check.name, start, end, trigger="manual", started_at=now)
        await state.complete_run(run_id, result)
        (stored,) = await state.day_buckets(check.name, case.day, case.day, check.timezone)
        snap = CheckSnapshot(check=check.name, buckets=(stored.bucket,))
    finally:
        await state.close()
    # Served as it is: an older verdict in its place would be a wrong answer.
    assert stored.run_id == run_id and stored.bucket.status == "error"
    assert stored.bucket.reasons[0].startswith("unexplained_difference: ")
    registry = build_registry([reconciliation_part(lambda: {check.name: snap})])
    labels = {"check": check.name, "day": case.day.isoformat()}
    assert registry.get_sample_value("driftgauge_bucket_unexplained", labels) == 1
    assert registry.get_sample_value("driftgauge_bucket_status", {**labels, "status": "error"}) == 1


@pytest.mark.parametrize("reader", ["pg", "os"])
async def test_a_live_drill_whose_keys_do_not_add_up_says_so(loaded: Loaded, reader: str) -> None:
    case = CASES[0]
    check = loaded.config(case, reader, 5000)
    async with adapters(check) as (source, rdr):
        honest = await drill_live(check, source, rdr, case.day, "02:00+01:00")
        broken = await drill_live(
            check, source, DropOneRow(rdr, f"{case.id}-h6"), case.day, "02:00+01:00"
        )
    assert honest.keys and honest.unexplained is None
    assert str(broken.unexplained).startswith("unexplained_difference: ")
