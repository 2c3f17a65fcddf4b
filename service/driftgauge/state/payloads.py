"""Stored runs, day buckets and keys as JSON payloads, declared once for the API and the CLI.

Field order is the JSON's key order; the docstrings and descriptions are the OpenAPI text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass

from driftgauge.core.instants import Instant
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


# One declaration for the run table's row and the API's run: the state reads return it,
# the API shows it as it is (instants in ISO 8601), and a dataclass keeps it cheap to make.
@dataclass(frozen=True)
class CheckRun:
    """One run of a check."""

    id: int
    check: str
    trigger: str
    window_start: Instant
    window_end: Instant
    scheduled_for: Instant | None
    started_at: Instant
    finished_at: Instant | None
    status: RunStatus
    complete: bool
    error: str | None
    duration_seconds: float | None
    queries: int
    rows_fetched: int
    replica: str
    row_hash: str = Field(
        default="md5",
        description="The hash of each row encoding the run's digests were computed with "
        "(md5 or lookup3); digests of runs with different hashes are not comparable.",
    )
