"""The planner's cost measure: both scans timed in turn, a store without digests refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from driftgauge.core.errors import ConfigError
from driftgauge.encoding import sizing
from driftgauge.engine.calibrate import calibrate
from driftgauge.stores.memory import DigestMemoryAdapter, MemoryAdapter

from .engine_helpers import BASE, day_rows


async def test_both_scans_are_timed_in_turn_at_a_first_runs_width() -> None:
    rows = [r for d in range(3) for r in day_rows(d, 50)]
    adapter = DigestMemoryAdapter(rows)
    got = await calibrate("dst", "opensearch", adapter, BASE, BASE + timedelta(days=3), 3, 2)
    width = sizing.first_width(3)
    assert adapter.calls == ["buckets:day", f"days+cells:{width}"] * 2
    assert (got.rows, got.width, len(got.days_seconds), len(got.digests_seconds)) == (
        150,
        width,
        2,
        2,
    )
    assert got.digest_pass > 0


async def test_a_store_without_digests_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"stores\.src: a mariadb store builds no difference"):
        await calibrate("src", "mariadb", MemoryAdapter([]), BASE, BASE + timedelta(days=1), 1)
