"""The planner's measured cost constants per store (`driftgauge calibrate`), kept and read."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from driftgauge.core.errors import StateError
from driftgauge.pg.calls import PgCalls


class StoreCosts:
    """Read and write the store_costs table through the state database's calls."""

    def __init__(self, calls: PgCalls) -> None:
        self.calls = calls

    async def save(
        self, store: str, kind: str, digest_pass: float, rows: int, measured_at: datetime
    ) -> None:
        """Keep a store's measured digests' cost, replacing its earlier measure."""
        if not (math.isfinite(digest_pass) and digest_pass > 0):
            raise StateError(f"stores.{store}: a digests' cost of {digest_pass} is not a ratio")
        await self.calls.execute(
            "keep a store's measured cost",
            "INSERT INTO store_costs (store, kind, digest_pass, rows, measured_at)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (store) DO UPDATE SET"
            " kind = EXCLUDED.kind, digest_pass = EXCLUDED.digest_pass,"
            " rows = EXCLUDED.rows, measured_at = EXCLUDED.measured_at",
            store,
            kind,
            digest_pass,
            rows,
            measured_at,
        )

    async def digest_pass(self, stores: Sequence[str]) -> dict[str, float]:
        """Return the measured digests' cost of each of `stores` that has one."""
        recs = await self.calls.fetch(
            "read the stores' measured costs",
            "SELECT store, digest_pass FROM store_costs WHERE store = ANY($1::text[])",
            list(stores),
        )
        return {r["store"]: float(r["digest_pass"]) for r in recs}
