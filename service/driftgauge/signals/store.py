"""Vocabulary and volume verdicts in the state database, and their latest values for metrics."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from driftgauge.pg.calls import PgCalls
from driftgauge.signals.vocabulary import VocabularyResult
from driftgauge.signals.volume import VolumeDay, VolumeStatus

SAMPLE_VALUES = 100
# The vocabulary and volume metrics' reads, each over the checks ($1).
_SNAPSHOT_QUERIES = (
    "SELECT check_name, field, unmatched_values, unmatched_rows"
    " FROM vocabulary_results WHERE check_name = ANY($1::text[])",
    "SELECT check_name, day, status, history_days"
    " FROM volume_results WHERE check_name = ANY($1::text[])",
)


@dataclass(frozen=True)
class SignalsSnapshot:
    """The latest vocabulary verdict per (check, field) and volume verdict per (check, day)."""

    vocabulary: dict[tuple[str, str], tuple[int, int]]
    """(check, field) → (unmatched values, unmatched rows)."""
    volume: dict[tuple[str, date], tuple[VolumeStatus, int | None]]
    """(check, day) → (status, days of history), for each check's latest computation."""


class SignalsStore:
    """Record vocabulary and volume verdicts; every call has a deadline."""

    def __init__(self, pool: Any, timeout: float = 10.0) -> None:
        self._db = PgCalls(pool, timeout)

    async def record_vocabulary(self, results: Sequence[VocabularyResult], now: datetime) -> None:
        """Replace the stored verdict of each (check, field)."""
        rows = []
        for r in results:
            top = sorted(r.unmatched.items(), key=lambda kv: (-kv[1], str(kv[0])))
            rows.append(
                (
                    r.check,
                    r.field,
                    now,
                    r.window_start,
                    r.window_end,
                    r.unmatched_values,
                    r.unmatched_rows,
                    json.dumps([[v, n] for v, n in top[:SAMPLE_VALUES]]),
                )
            )
        async with self._db.transaction("record vocabulary results") as conn:
            await conn.executemany(
                "INSERT INTO vocabulary_results (check_name, field, computed_at, window_start,"
                " window_end, unmatched_values, unmatched_rows, sample)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)"
                " ON CONFLICT (check_name, field) DO UPDATE SET"
                " computed_at = EXCLUDED.computed_at, window_start = EXCLUDED.window_start,"
                " window_end = EXCLUDED.window_end,"
                " unmatched_values = EXCLUDED.unmatched_values,"
                " unmatched_rows = EXCLUDED.unmatched_rows, sample = EXCLUDED.sample",
                rows,
            )

    async def record_volume(self, check: str, days: Sequence[VolumeDay], now: datetime) -> None:
        """Store one computation of a check's volume band; days it leaves out stop exporting."""
        rows = [
            (
                check,
                d.day,
                now,
                d.distinct_keys,
                d.mean,
                d.sd,
                d.low,
                d.high,
                d.anomaly,
                d.history_days,
                d.status,
            )
            for d in days
        ]
        async with self._db.transaction("record volume results") as conn:
            await conn.execute("DELETE FROM volume_results WHERE check_name = $1", check)
            await conn.executemany(
                "INSERT INTO volume_results (check_name, day, computed_at, distinct_keys, mean,"
                " sd, low, high, anomaly, history_days, status)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                rows,
            )

    async def vocabulary(self, check: str) -> list[dict[str, Any]]:
        """Return the check's latest vocabulary verdicts with a sample of unmatched values."""
        recs = await self._db.fetch(
            "read vocabulary results",
            "SELECT * FROM vocabulary_results WHERE check_name = $1 ORDER BY field",
            check,
        )
        return [{**dict(r), "sample": json.loads(r["sample"])} for r in recs]

    async def volume(self, check: str) -> list[VolumeDay]:
        """Return the check's latest volume verdicts, oldest day first."""
        recs = await self._db.fetch(
            "read volume results",
            "SELECT * FROM volume_results WHERE check_name = $1 ORDER BY day",
            check,
        )
        return [
            VolumeDay(
                r["day"],
                r["distinct_keys"],
                r["mean"],
                r["sd"],
                r["low"],
                r["high"],
                r["history_days"],
                r["status"],
            )
            for r in recs
        ]

    async def snapshot(self, checks: Sequence[str]) -> SignalsSnapshot:
        """Return what the vocabulary and volume metrics export."""
        vocab, vol = await self._db.fetch_each(
            "read vocabulary and volume metrics", _SNAPSHOT_QUERIES, list(checks)
        )
        return SignalsSnapshot(
            vocabulary={
                (r["check_name"], r["field"]): (r["unmatched_values"], r["unmatched_rows"])
                for r in vocab
            },
            volume={(r["check_name"], r["day"]): (r["status"], r["history_days"]) for r in vol},
        )
