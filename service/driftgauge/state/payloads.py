"""Stored runs, day buckets and keys as JSON payloads, declared once for the API and the CLI.

Field order is the JSON's key order; the docstrings and descriptions are the OpenAPI text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from driftgauge.engine.payloads import BucketResultOut, DriftKind, ShownKey

RunStatus = Literal["running", "ok", "drift", "error", "nothing_judged"]


class BucketOut(BucketResultOut):
    """One day bucket as the latest completed run that judged it left it."""

    run_id: int
    checked_at: str | None


class KeyOut(BaseModel):
    """One sampled differing key."""

    key: ShownKey
    kind: DriftKind
    source_copies: int
    reader_copies: int
    key_hash: str | None
    event_time: str | None


class RunOut(BaseModel):
    """One run of a check."""

    id: int
    check: str
    trigger: str
    window_start: str
    window_end: str
    scheduled_for: str | None
    started_at: str
    finished_at: str | None
    status: RunStatus
    complete: bool
    error: str | None
    duration_seconds: float | None
    queries: int
    rows_fetched: int
    replica: str
    row_hash: str = Field(
        "md5",
        description="The hash of each row encoding the run's digests were computed with "
        "(md5 or lookup3); digests of runs with different hashes are not comparable.",
    )
