"""A backfill as the API and the CLI show it: its row, targets, consumers, runs and events."""

from __future__ import annotations

import json
from typing import Any

from driftgauge.core.paging import Page
from driftgauge.repair.errors import NotFound
from driftgauge.repair.models import (
    BackfillConsumerOut,
    BackfillEventOut,
    BackfillOut,
    BackfillShown,
    BackfillTargetOut,
    ReplayOut,
)

ORDER = ("planned", "announced", "running", "verified", "replayed", "closed")
NEXT_STEP = {
    "planned": "announce (or start when no signing consumer read a target)",
    "announced": "start",
    "running": "verify",
    "verified": "replay",
    "replayed": "close",
    "closed": "nothing: the backfill is closed",
}
# A backfill shows its row's columns under their own names, in this order (JSON ones parsed).
_SHOWN_COLUMNS = (
    "pipeline",
    "status",
    "reason",
    "first_bad",
    "reset_to",
    "planned_at",
    "planned_by",
    "announced_at",
    "announced_by",
    "announcement",
    "started_at",
    "started_by",
    "verified_at",
    "replayed_at",
    "closed_at",
    "closed_by",
)
_SHOWN_JSON = ("totals_before", "totals_after", "diff")
_TARGET_JSON = ("before", "after", "verified")


def _loads(value: str | None) -> Any:
    return json.loads(value) if value is not None else None


# A backfill's consumers under the names it shows them by, with their replay's columns.
_CONSUMERS = (
    "SELECT b.consumer AS name, b.rank, b.signs, c.kind, c.owner, c.signed_by, c.webhook_url,"
    " c.command, p.outcome, p.started_at, p.finished_at, p.detail FROM backfill_consumers b"
    " LEFT JOIN consumers c ON c.name = b.consumer"
    " LEFT JOIN backfill_replays p ON p.backfill_id = b.backfill_id"
    "   AND p.consumer = b.consumer"
    " WHERE b.backfill_id = $1 ORDER BY b.rank, b.consumer"
)
_EVENTS = (
    'SELECT at, step, outcome, rule, actor AS "by", consumer, detail FROM backfill_events'
    " WHERE backfill_id = $1 ORDER BY id"
)


def _consumer(c: Any) -> BackfillConsumerOut:
    replay = None if c["outcome"] is None else ReplayOut.model_validate(dict(c))
    return BackfillConsumerOut.model_validate({**dict(c), "replay": replay})


async def load(conn: Any, bf_id: int, *, lock: bool = False) -> BackfillOut:
    """Return a backfill's row with its next step, partitions, targets and consumers."""
    rec = await conn.fetchrow(
        "SELECT * FROM backfills WHERE id = $1" + (" FOR UPDATE" if lock else ""), bf_id
    )
    if rec is None:
        raise NotFound(f"no backfill {bf_id}")
    targets = await conn.fetch(
        "SELECT * FROM backfill_targets WHERE backfill_id = $1 ORDER BY partition_start", bf_id
    )
    return BackfillOut(
        id=rec["id"],
        check=rec["check_name"],
        **{column: rec[column] for column in _SHOWN_COLUMNS},
        **{column: _loads(rec[column]) for column in _SHOWN_JSON},
        next_step=NEXT_STEP[rec["status"]],
        partitions=[(t["partition_start"], t["partition_end"]) for t in targets],
        targets=[
            BackfillTargetOut(
                start=t["partition_start"],
                end=t["partition_end"],
                run_id=t["run_id"],
                **{column: _loads(t[column]) for column in _TARGET_JSON},
            )
            for t in targets
        ],
        consumers=[_consumer(c) for c in await conn.fetch(_CONSUMERS, bf_id)],
    )


async def shown(conn: Any, bf_id: int) -> BackfillShown:
    """Return a backfill as loaded, with its recompute's ledger runs and events, oldest first."""
    bf = await load(conn, bf_id)
    runs = await conn.fetch(
        "SELECT ledger_run_id FROM backfill_runs WHERE backfill_id = $1 ORDER BY ledger_run_id",
        bf_id,
    )
    return BackfillShown(
        **dict(bf),
        ledger_runs=[r["ledger_run_id"] for r in runs],
        events=[BackfillEventOut.model_validate(dict(e)) for e in await conn.fetch(_EVENTS, bf_id)],
    )


async def listed(conn: Any, *, check: str | None, open_only: bool, page: Page) -> list[BackfillOut]:
    """Return backfills, newest first (without their events)."""
    ids = [
        r["id"]
        for r in await conn.fetch(
            "SELECT id FROM backfills WHERE ($1::text IS NULL OR check_name = $1)"
            " AND (status <> 'closed' OR NOT $2) ORDER BY id DESC LIMIT $3 OFFSET $4",
            check,
            open_only,
            page.limit,
            page.offset,
        )
    ]
    return [await load(conn, i) for i in ids]
