"""Repair breaches: a watermark moved back or stalled, a silent change, a rerun that appended."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal, get_args

from driftgauge.core.paging import Page
from driftgauge.pg.calls import PgCalls
from driftgauge.repair.models import RepairBreachOut
from driftgauge.repair.parts import fetch_page

BreachKind = Literal["watermark_moved_back", "watermark_stalled", "silent_change", "rerun_appended"]
KINDS: tuple[BreachKind, ...] = get_args(BreachKind)


async def record(
    conn: Any, kind: BreachKind, subject: str, detail: str, facts: dict[str, Any], now: datetime
) -> None:
    """Record that a breach holds now (first seen once, last seen and facts updated)."""
    await conn.execute(
        "INSERT INTO repair_breaches (kind, subject, detail, facts, first_seen, last_seen,"
        " active) VALUES ($1, $2, $3, $4::jsonb, $5, $5, true)"
        " ON CONFLICT (kind, subject) DO UPDATE SET detail = EXCLUDED.detail,"
        " facts = EXCLUDED.facts, last_seen = EXCLUDED.last_seen, active = true,"
        # A breach that ended and holds again is a new occurrence.
        " first_seen = CASE WHEN repair_breaches.active THEN repair_breaches.first_seen"
        "   ELSE EXCLUDED.first_seen END",
        kind,
        subject,
        detail,
        json.dumps(facts),
        now,
    )


async def resolve(conn: Any, kind: BreachKind, subject: str, now: datetime) -> None:
    """Mark a breach as no longer holding."""
    await conn.execute(
        "UPDATE repair_breaches SET active = false, last_seen = $3"
        " WHERE kind = $1 AND subject = $2 AND active",
        kind,
        subject,
        now,
    )


async def resolve_others(
    conn: Any, kind: BreachKind, holding: Collection[str], now: datetime, *, prefix: str = ""
) -> None:
    """Mark every active breach of `kind` (under `prefix`) not in `holding` as ended."""
    await conn.execute(
        "UPDATE repair_breaches SET active = false, last_seen = $3"
        " WHERE kind = $1 AND active AND NOT (subject = ANY($2::text[]))"
        " AND starts_with(subject, $4)",
        kind,
        list(holding),
        now,
        prefix,
    )


class Breaches:
    """Read the recorded repair breaches."""

    def __init__(self, calls: PgCalls) -> None:
        self.calls = calls

    async def list(
        self, *, kind: str | None = None, active_only: bool = False, page: Page
    ) -> list[RepairBreachOut]:
        """Return recorded breaches, newest first."""
        recs = await fetch_page(
            self.calls,
            "read repair breaches",
            "SELECT * FROM repair_breaches WHERE ($1::text IS NULL OR kind = $1)"
            " AND (active OR NOT $2) ORDER BY first_seen DESC, kind, subject",
            page,
            kind,
            active_only,
        )
        return [
            RepairBreachOut.model_validate({**dict(r), "facts": json.loads(r["facts"])})
            for r in recs
        ]

    async def counts(self) -> dict[str, tuple[int, int]]:
        """Return per kind: (active now, ever recorded)."""
        recs = await self.calls.fetch(
            "count repair breaches",
            "SELECT kind, count(*) FILTER (WHERE active) AS active, count(*) AS n"
            " FROM repair_breaches GROUP BY kind",
        )
        return {r["kind"]: (int(r["active"]), int(r["n"])) for r in recs}
