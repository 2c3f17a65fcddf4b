"""PostgreSQL epoch microseconds (the float fast path too) against exact oracles, on the server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from driftgauge.core.fields import TimestampPrecision
from driftgauge.encoding.digest import epoch_micros, truncate_micros
from driftgauge.stores.postgres.dialect import FAST_SPAN, POSTGRES

from .conftest import PG_DSN, TIMEOUT

pytestmark = pytest.mark.integration

EXACT = "(extract(epoch FROM t) * 1000000)::bigint"
"""The numeric extract: exact by construction, the oracle for the float form."""

LO, HI = (datetime.fromisoformat(b) for b in FAST_SPAN)
US = timedelta(microseconds=1)


@pytest.fixture
async def conn() -> AsyncIterator[asyncpg.Connection]:
    """Yield a connection in a UTC session, as the adapter's pool opens them."""
    c = await asyncpg.connect(PG_DSN, timeout=TIMEOUT, server_settings={"TimeZone": "UTC"})
    try:
        yield c
    finally:
        await c.close()


def edges() -> list[datetime]:
    """Return the span's bounds and the epoch, a microsecond either side, and far instants."""
    out = []
    for at in (LO, HI, datetime(2000, 1, 1, tzinfo=UTC)):
        out += [at - US, at, at + US]
    for year in (1, 1833, 1901, 1969, 2026, 2037, 2041, 2300, 9999):
        for micros in (0, 1, 499_999, 500_000, 999_999):
            out.append(datetime(year, 6, 30, 23, 59, 59, micros, tzinfo=UTC))
    return out


@pytest.mark.parametrize("precision", ["us", "ms"])
async def test_epoch_micros_matches_python_at_every_edge(
    conn: asyncpg.Connection, precision: TimestampPrecision
) -> None:
    got = await conn.fetch(
        f"SELECT t, {POSTGRES.epoch_micros('t', precision)} AS us "
        "FROM unnest($1::timestamptz[]) AS t",
        edges(),
    )
    assert len(got) == len(edges())
    for r in got:
        want = truncate_micros(epoch_micros(r["t"]), precision)
        assert r["us"] == want, f"{r['t'].isoformat()} ({precision})"


RANDOM_INSTANTS = """
SELECT count(*) AS n, count(*) FILTER (WHERE {expr} IS DISTINCT FROM {exact}) AS wrong
FROM (SELECT $1::timestamptz + (random() * extract(epoch FROM $2::timestamptz - $1))
             * interval '1 second' + (floor(random() * 1000000)) * interval '1 microsecond' AS t
      FROM generate_series(1, $3)) AS s
WHERE t >= $1 AND t < $2
"""


async def test_two_million_random_instants_in_the_fast_span_are_exact(
    conn: asyncpg.Connection,
) -> None:
    sql = RANDOM_INSTANTS.format(expr=POSTGRES.epoch_micros("t", "us"), exact=EXACT)
    got = await conn.fetchrow(sql, LO, HI, 2_000_000, timeout=120)
    assert got["n"] > 1_990_000
    assert got["wrong"] == 0
    # Both precisions floor alike: ms is us floored to a thousand.
    ms = RANDOM_INSTANTS.format(
        expr=POSTGRES.epoch_micros("t", "ms"), exact=f"(({EXACT}) / 1000 * 1000)"
    )
    assert (await conn.fetchrow(ms, LO, HI, 500_000, timeout=120))["wrong"] == 0


async def test_the_bare_float_form_is_wrong_beyond_the_span_so_the_guard_matters(
    conn: asyncpg.Connection,
) -> None:
    # Shows the oracle can fire: past 2^51 us the float's roundings reach half a microsecond.
    bare = "(date_part('epoch', t) * 1000000)::bigint"
    far = datetime(2200, 1, 1, tzinfo=UTC), datetime(2300, 1, 1, tzinfo=UTC)
    got = await conn.fetchrow(RANDOM_INSTANTS.format(expr=bare, exact=EXACT), *far, 200_000)
    assert got["wrong"] > 0
    guarded = RANDOM_INSTANTS.format(expr=POSTGRES.epoch_micros("t", "us"), exact=EXACT)
    assert (await conn.fetchrow(guarded, *far, 200_000))["wrong"] == 0
