"""Drift in a few days of a long window: days only, then each differing day scanned alone.

On real stores, PostgreSQL -> PostgreSQL and PostgreSQL -> OpenSearch: one dense day (more
differing rows than the first one-day table holds, so it is scanned once more, wider) and
one sparse day among 12. Each is peeled, not drilled down, and its counts are the planted
ones and those the drill-down alone finds. A stored run's next run scans only the hours
the sparse day's drift sat in.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.configfile.loader import load_text
from driftgauge.engine.plan import StoredDrift
from driftgauge.engine.result import RunResult
from driftgauge.engine.strategy import FirstPass
from tests.store_fixtures import PG_OS_STORES, load_index, pg_table

from .conftest import OS_URL
from .runs import reconcile_window
from .test_cli import cli

pytestmark = pytest.mark.integration

T0 = datetime(2026, 4, 1, tzinfo=UTC)
DAYS = 12
PER_DAY = 1000
STEP = timedelta(seconds=86400 / PER_DAY)
DENSE_DAY, SPARSE_DAY = 3, 8
CONFIG = (
    PG_OS_STORES
    + """\
  c:
    source: {{store: pg, table: src, key: id, time: at}}
    reader: {{store: {reader}, {where}, key: id, time: at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
    drilldown: {{leaf_rows: 40}}
"""
)


def _ids(day: int) -> range:
    return range(day * PER_DAY, (day + 1) * PER_DAY)


# The dense day: 750 of its 1,000 rows differ (1,000 entries), beyond 3 x 256 cells.
MISSING = [i for i in _ids(DENSE_DAY) if i % 4 == 0] + [SPARSE_DAY * PER_DAY + 17]
CHANGED = [i for i in _ids(DENSE_DAY) if i % 4 == 1] + [SPARSE_DAY * PER_DAY + 200]
EXTRA = [(10**6 + j, DENSE_DAY * PER_DAY + 2 + 4 * j) for j in range(250)]
"""Extra rows: (id, the id whose time they take)."""
EXTRA.append((2 * 10**6, SPARSE_DAY * PER_DAY + 301))


def at(i: int) -> datetime:
    """Return row i's event time: PER_DAY rows a day, evenly spaced."""
    return T0 + (i // PER_DAY) * timedelta(days=1) + (i % PER_DAY) * STEP


def _reader_rows() -> list[tuple[int, str, datetime]]:
    rows = [(i, "changed" if i in CHANGED else f"l{i % 7}", at(i)) for i in range(DAYS * PER_DAY)]
    missing = set(MISSING)
    return [r for r in rows if r[0] not in missing] + [(i, "ghost", at(j)) for i, j in EXTRA]


@pytest.fixture(scope="module", params=["postgres", "opensearch"])
async def config(
    request: pytest.FixtureRequest,
    pg_database: str,
    os_client: AsyncOpenSearch,
    os_index: Callable[[str], str],
) -> AsyncIterator[str]:
    """Yield a config over the source table and a reader of the planted drift."""
    rows = [(i, f"l{i % 7}", at(i)) for i in range(DAYS * PER_DAY)]
    for table, content in (("src", rows), ("dst", _reader_rows())):
        columns = "id bigint, label text, at timestamptz"
        await pg_table(pg_database, table, columns, content, replace=True)
    if request.param == "postgres":
        yield CONFIG.format(dsn=pg_database, os=OS_URL, reader="pg", where="table: dst")
        return
    index = os_index("dg_rescan")
    await load_index(
        os_client,
        index,
        {"id": "long", "label": "keyword", "at": "date"},
        ({"id": i, "label": lab, "at": t.isoformat()} for i, lab, t in _reader_rows()),
    )
    yield CONFIG.format(dsn=pg_database, os=OS_URL, reader="os", where=f"index: {index}")


async def _run(config: str, *, rescan: bool) -> RunResult:
    check = load_text(config).checks["c"]
    return await reconcile_window(
        check, T0, T0 + timedelta(days=DAYS), first=FirstPass(rescan=rescan)
    )


def _counts(result: RunResult) -> dict[int, tuple[int, int, int]]:
    return {
        (b.start.astimezone(UTC) - T0).days: (b.missing, b.extra, b.mismatched)
        for b in result.buckets
        if b.status != "ok"
    }


async def test_a_few_drifted_days_are_each_scanned_alone_and_peeled(config: str) -> None:
    result = await _run(config, rescan=True)
    assert result.error is None
    assert _counts(result) == {DENSE_DAY: (250, 250, 250), SPARSE_DAY: (1, 1, 1)}
    drifted = [b for b in result.buckets if b.status != "ok"]
    assert [b.tree for b in drifted] == [[], []], "a drifted day was drilled down"
    # The differing rows, and the equal reader row at each extra row's very instant.
    assert result.rows_fetched == len(MISSING) + 2 * len(EXTRA) + 2 * len(CHANGED)


async def test_the_drill_down_alone_finds_the_same_counts(config: str) -> None:
    scanned = await _run(config, rescan=True)
    drilled = await _run(config, rescan=False)
    assert drilled.error is None
    assert _counts(drilled) == _counts(scanned)
    assert any(b.tree for b in drilled.buckets if b.status != "ok")
    assert drilled.rows_fetched > scanned.rows_fetched


def test_a_stored_run_plans_the_next_as_days_and_a_scan_of_each_drifted_day(
    config: str, tmp_path: Path
) -> None:
    path = tmp_path / "rescan.yml"
    path.write_text(config)
    window = ("--since", "2026-04-01", "--until", "2026-04-12")
    runs = [json.loads(cli("check", "c", "--config", str(path), *window, "--json").stdout)]
    runs.append(json.loads(cli("check", "c", "--config", str(path), *window, "--json").stdout))
    for run in runs:
        assert run["error"] is None
        totals = run["totals"]
        assert (totals["missing"], totals["extra"], totals["mismatched"]) == (251, 251, 251)
    # Stored drift in 2 of 12 days: the day pass on both sides, then each of those two
    # days once a side, sized from its verdict (no second, wider scan of the dense day),
    # then the differing rows fetched. The sparse day's drift sat in its hours 0, 4 and
    # 7: only 00:00-08:00 of it is scanned (334 rows a side, the day's others alike).
    hours = at(SPARSE_DAY * PER_DAY) + timedelta(hours=8)
    cover = sum(1 for i in _ids(SPARSE_DAY) if at(i) < hours)
    assert cover == 334
    scanned = 2 * DAYS * PER_DAY + 2 * PER_DAY + 2 * cover + runs[1]["rows_fetched"]
    assert runs[1]["rows_scanned"] == scanned


async def test_hours_the_drift_left_have_the_whole_day_scanned(config: str) -> None:
    check = load_text(config).checks["c"]
    day = T0 + timedelta(days=SPARSE_DAY)
    # A stored verdict that put the sparse day's drift at 20:00, where none of it is:
    # the scan of that hour sees the rest of the day differ, so the day is scanned whole.
    dense = T0 + timedelta(days=DENSE_DAY)
    stale = {day: StoredDrift(3, (day + timedelta(hours=20),)), dense: StoredDrift(1000)}
    first = FirstPass(rescan=True, day_drift=stale)
    result = await reconcile_window(check, T0, T0 + timedelta(days=DAYS), first=first)
    assert result.error is None
    assert _counts(result) == {DENSE_DAY: (250, 250, 250), SPARSE_DAY: (1, 1, 1)}
    assert all(b.tree == [] for b in result.buckets), "a drifted day was drilled down"
    # Per side: the day pass, the hour 20:00 (41 or 42 rows), the whole sparse day and
    # the dense day, then the differing rows.
    hour = sum(
        1
        for i in _ids(SPARSE_DAY)
        if day + timedelta(hours=20) <= at(i) < day + timedelta(hours=21)
    )
    want = 2 * DAYS * PER_DAY + 2 * hour + 2 * 2 * PER_DAY + result.rows_fetched
    assert result.rows_scanned == want
