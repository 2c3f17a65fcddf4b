"""PostgreSQL -> OpenSearch difference digests peel, fetch only the differing rows, or fall back.

A `date` field keeps milliseconds: the rows a peel names must still be found there by
their event time (a one-microsecond span is no millisecond range), and rows sharing a
millisecond or a microsecond with a differing one must not be taken for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.configfile.loader import load_text
from driftgauge.engine.result import RunResult
from driftgauge.engine.strategy import FirstPass
from tests.store_fixtures import PG_OS_STORES, bulk_load, create_index, load_index, pg_table

from .conftest import OS_URL
from .runs import opened, reconcile_window

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, tzinfo=UTC)
DAYS = 3
ROWS = 1800
CONFIG = (
    PG_OS_STORES
    + """\
  c:
    source: {{store: pg, table: {table}, key: id, time: at}}
    reader: {{store: os, index: {index}, key: id, time: at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
    drilldown: {{leaf_rows: 40}}
"""
)
MISSING = [7, 300, 610, 650, 1210, 1500, 1790]
CHANGED = [8, 9, 611, 1211, 1212]
EXTRA = [(5001, 100), (5002, 700), (5003, 1300)]
"""Extra rows: (id, the id whose time they take): a millisecond shared with an equal row."""


def at(i: int, micros: bool) -> datetime:
    """Return row i's event time: every 288 s, in pairs a millisecond (or microsecond) apart."""
    step = timedelta(microseconds=1 if micros else 1000)
    return T0 + timedelta(seconds=288 * (i // 2)) + (i % 2) * step


@pytest.fixture(scope="module", params=["date", "date_nanos"])
async def pair(
    request: pytest.FixtureRequest,
    pg_database: str,
    os_client: AsyncOpenSearch,
    os_index: Callable[[str], str],
) -> AsyncIterator[str]:
    """Yield a config: PG rows and an index of them with the planted drift."""
    kind = request.param
    micros = kind == "date_nanos"
    table = f"src_{kind}"
    rows = [(i, f"l{i % 5}", at(i, micros)) for i in range(1, ROWS + 1)]
    await pg_table(pg_database, table, "id bigint, label text, at timestamptz", rows)
    index = os_index("dg_ospeel")
    await create_index(os_client, index, {"id": "long", "label": "keyword", "at": kind}, shards=2)
    docs = [
        (i, "changed" if i in CHANGED else label, t) for i, label, t in rows if i not in MISSING
    ]
    docs += [(i, "ghost", at(j, micros)) for i, j in EXTRA]
    await bulk_load(
        os_client, index, ({"id": i, "label": lab, "at": t.isoformat()} for i, lab, t in docs)
    )
    yield CONFIG.format(dsn=pg_database, os=OS_URL, index=index, table=table)


async def _run(config: str, width: int) -> RunResult:
    check = load_text(config).checks["c"]
    end = T0 + timedelta(days=DAYS + 1)
    return await reconcile_window(check, T0, end, first=FirstPass(width=width))


def _found(result: RunResult) -> list[int]:
    return [sum(getattr(b, k) for b in result.buckets) for k in ("missing", "extra", "mismatched")]


async def test_every_drifted_day_peels_and_fetches_only_its_differing_rows(pair: str) -> None:
    result = await _run(pair, 64)
    assert result.error is None
    assert _found(result) == [len(MISSING), len(EXTRA), len(CHANGED)]
    drifted = [b for b in result.buckets if b.missing or b.extra or b.mismatched]
    assert len(drifted) == DAYS
    # Peeled, not drilled down: no tree, and the hours of the rows the digests named.
    assert [b.tree for b in drifted] == [[]] * DAYS
    assert all(b.drift_hours for b in drifted)
    # The missing and changed rows from the source, the extra and changed from the index,
    # and the equal row at each extra row's very time; not the rows a millisecond or a
    # microsecond away.
    assert result.rows_fetched == len(MISSING) + 2 * len(EXTRA) + 2 * len(CHANGED)


async def test_a_day_whose_tables_do_not_peel_is_still_counted_exactly(pair: str) -> None:
    sized = await _run(pair, 64)
    result = await _run(pair, 1)  # one cell a sub-table holds every differing row
    assert result.error is None
    assert _found(result) == [len(MISSING), len(EXTRA), len(CHANGED)]
    drifted = [b for b in result.buckets if b.missing or b.extra or b.mismatched]
    # Scanned again wider and peeled, or drilled down: never a count guessed from the
    # first tables, and either costs more queries than tables that peel at once.
    assert len(drifted) == DAYS and all(b.tree or b.drift_hours for b in drifted)
    assert result.queries > sized.queries


DENSE = 20_000
KEPT = 1_500
"""A day of DENSE rows whose index holds only the first KEPT: more than a pass's table holds."""


@pytest.fixture(scope="module")
async def dense(
    pg_database: str, os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> AsyncIterator[str]:
    """Yield a config of one day whose index lacks most of its rows."""
    rows = [(i, f"l{i % 5}", T0 + timedelta(seconds=4 * i)) for i in range(1, DENSE + 1)]
    await pg_table(pg_database, "src_dense", "id bigint, label text, at timestamptz", rows)
    index = os_index("dg_osdense")
    await load_index(
        os_client,
        index,
        {"id": "long", "label": "keyword", "at": "date_nanos"},
        ({"id": i, "label": lab, "at": t.isoformat()} for i, lab, t in rows[:KEPT]),
        shards=2,
    )
    yield CONFIG.format(dsn=pg_database, os=OS_URL, index=index, table="src_dense")


async def test_a_dense_day_is_scanned_again_wider_than_a_pass_and_peels(dense: str) -> None:
    result = await _run(dense, 64)
    assert result.error is None
    assert _found(result) == [DENSE - KEPT, 0, 0]
    (day,) = [b for b in result.buckets if b.missing]
    # Peeled from a second, one-day table wider than a pass's (iblt.MAX_WIDTH): no tree,
    # and only the missing rows fetched, not the day's.
    assert day.tree == [] and day.drift_hours
    assert result.rows_fetched == DENSE - KEPT


async def test_a_table_wider_than_a_pass_is_refused_over_several_days(pair: str) -> None:
    check = load_text(pair).checks["c"]
    async with opened(check.reader) as reader:
        with pytest.raises(ValueError, match="built for one day at a time, not for 3 days"):
            await reader.day_and_cell_digests(T0, T0 + timedelta(days=DAYS), 8192)  # type: ignore[attr-defined]
