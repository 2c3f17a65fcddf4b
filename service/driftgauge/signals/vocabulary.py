"""Vocabulary check: source values a field takes that the reader view's filter cannot match."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from dataclasses import field as default
from datetime import datetime
from typing import Any

from driftgauge.config.runtime import Check, PostgresStore, View
from driftgauge.core.errors import StoreError
from driftgauge.stores.postgres import dialect as pg_sql


@dataclass(frozen=True)
class VocabularyResult:
    """One field's source values that the reader does not accept, with their row counts."""

    check: str
    field: str
    window_start: datetime
    window_end: datetime
    unmatched: dict[str | None, int] = default(default_factory=dict)
    """Value (None for NULL) → source rows carrying it."""

    @property
    def unmatched_values(self) -> int:
        """Return how many distinct values the reader cannot match."""
        return len(self.unmatched)

    @property
    def unmatched_rows(self) -> int:
        """Return how many source rows carry such values."""
        return sum(self.unmatched.values())


def unmatched(counts: Mapping[str | None, int], accepted: Iterable[str]) -> dict[str | None, int]:
    """Return the values (with row counts) that are not among the accepted ones.

    NULL never matches a term filter, so it counts as unmatched.
    """
    ok = set(accepted)
    return {v: n for v, n in counts.items() if v is None or v not in ok}


def value_counts_sql(view: View, column: str) -> str:
    """Return SQL counting rows per value of `column` in [$1, $2), skipping excluded rows."""
    t = pg_sql.quote_ident(view.time_column)
    value = pg_sql.quote_ident(column)
    # Booleans read as true/false, the same text the reader filter's values are compared by.
    return (f"SELECT ({value})::text AS value, count(*) AS n FROM {pg_sql.relation(view)} "
            f"WHERE {t} >= $1::timestamptz AND {t} < $2::timestamptz "
            f"AND ({pg_sql.exclusion_sql(view)}) IS NULL GROUP BY 1")


@asynccontextmanager
async def source_connection(store: PostgresStore) -> AsyncIterator[Any]:
    """Yield a short-lived connection to a postgres source, closed afterwards."""
    import asyncpg

    from driftgauge.stores.postgres.adapter import translate_error

    try:
        async with asyncio.timeout(store.timeout):
            conn = await asyncpg.connect(store.dsn.reveal(), timeout=store.timeout,
                                         server_settings={"TimeZone": "UTC",
                                                          "application_name":
                                                          "driftgauge-vocabulary"})
    except StoreError:
        raise
    except Exception as exc:
        raise translate_error(store.name, "connect for the vocabulary check", exc) from exc
    try:
        yield conn
    finally:
        try:
            await conn.close(timeout=store.timeout)
        except Exception:
            conn.terminate()


async def measure_vocabulary(check: Check, conn: Any, start: datetime,
                             end: datetime) -> list[VocabularyResult]:
    """Return, per vocabulary field, the source values in [start, end) the reader cannot match."""
    from driftgauge.stores.postgres.adapter import translate_error

    out = []
    for vf in check.vocabulary:
        try:
            recs = await conn.fetch(value_counts_sql(check.source, vf.source_column), start, end,
                                    timeout=check.source.store.timeout)
        except Exception as exc:
            raise translate_error(check.source.store.name,
                                  f"count values of {vf.source_column}", exc) from exc
        counts = {r["value"]: int(r["n"]) for r in recs}
        out.append(VocabularyResult(check.name, vf.name, start, end,
                                    unmatched(counts, vf.accepted)))
    return out
