"""Response models of the REST API (they document the payloads in the OpenAPI schema).

The runs, buckets, nodes and keys inside them are declared once, in engine/payloads.py and
state/payloads.py; these are the API's own envelopes around them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from driftgauge.engine.payloads import NodeOut
from driftgauge.state.payloads import BucketOut, CheckRun, KeyOut, RunStatus


class DaysOut(BaseModel):
    """A range of day buckets of one check."""

    check: str
    since: str
    until: str
    days: list[BucketOut]


class DayOut(BaseModel):
    """One day bucket with its hours and any prefixes split over the whole day."""

    check: str
    bucket: BucketOut
    live: bool = Field(description="The hours were computed from both stores (live=true).")
    hours_live_only: bool = Field(
        description="The day differs but the run kept no hour nodes for it (its differences "
        "were peeled from the day's digests), so `hours` is empty: ask again with live=true "
        "and a bearer token to compute the hours from both stores."
    )
    hours: list[NodeOut] = Field(
        description="The stored run's hour nodes, or with live=true the hours from both stores."
    )
    prefixes: list[NodeOut] = Field(
        description="The stored run's key-hash prefixes split over the whole day."
    )


class HourOut(BaseModel):
    """One hour of a day: both sides' aggregates per key-hash prefix."""

    check: str
    day: str
    hour: int
    """The local clock hour of the bucket's start (two buckets share it on a fall-back day)."""
    label: str
    """The bucket's local start with its offset, e.g. 02:00+01:00: unique within the day."""
    start: str
    end: str
    live: bool
    prefix: str | None
    run_id: int | None
    node: NodeOut | None = Field(description="The stored hour node, if the run kept one.")
    differs: bool | None
    prefixes: list[NodeOut]


class KeysOut(BaseModel):
    """A page of a bucket's stored differing keys (a sample of at most api.sample_keys a kind)."""

    check: str
    day: str
    run_id: int
    limit: int
    offset: int
    total: int | None = Field(
        description="Differing keys of the bucket matching the filters, over every page: "
        "every key the run found of the kinds asked for, not only the stored ones. Null when "
        "the stored keys are a sample and a prefix or hour filter applies (the keys left out "
        "of the sample cannot be filtered)."
    )
    sampled: bool = Field(
        description="The stored keys of the kinds asked for are a sample (api.sample_keys per "
        "kind) smaller than the bucket's count: pages reach only the stored keys, fewer than total."
    )
    keys: list[KeyOut]


class RunsOut(BaseModel):
    """A page of runs, newest first."""

    check: str
    runs: list[CheckRun]


class TriggerOut(BaseModel):
    """One schedule of a check: when its runs last began and completed, when it is next due."""

    trigger: str
    last_started_at: str | None
    last_completed_at: str | None
    next_due_at: str | None
    missed: int | None = Field(
        description="Scheduled times since the trigger's last run began that began no run "
        "(null before the check's first run)."
    )


class ScheduleOut(BaseModel):
    """When a check runs."""

    recent_every_seconds: float | None
    recent_days: int
    full_every_seconds: float | None
    full_cron: str | None
    full_days: int
    triggers: list[TriggerOut] = Field(default_factory=list)


class CheckOut(BaseModel):
    """A configured check with its latest status."""

    name: str
    description: str
    status: RunStatus | None = Field(description="Status of the latest finished run.")
    running: bool
    last_run: CheckRun | None
    last_success_at: str | None
    schedule: ScheduleOut
    coverage: str = Field(
        description="Which rows of a window the check reads on the reader "
        "side: every row, or a bounded recent window (a reader API)."
    )
    row_hash: str = Field(
        "md5",
        description="The hash of each row's canonical encoding both sides compute: lookup3 "
        "where both kinds can (row_hash: auto), else md5.",
    )


class ChecksOut(BaseModel):
    """Every configured check."""

    checks: list[CheckOut]


class TriggeredOut(BaseModel):
    """A run started on request."""

    check: str
    run_id: int
    trigger: str
    run: str = Field(description="Where to follow the run.")


class ErrorOut(BaseModel):
    """Why a request was refused or failed."""

    detail: str


def answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """Return the OpenAPI `responses` entries of these error statuses."""
    return {code: {"model": ErrorOut, "description": ERRORS[code]} for code in codes}


ERRORS = {
    400: "The request body could not be read (e.g. it is not UTF-8).",
    401: "A bearer token is required, or the one given is not valid.",
    403: "No token is configured for this endpoint, so it is disabled.",
    404: "No such check, day, run or ledger run.",
    409: "Conflicts with the current state (a run in progress, a closed ledger run).",
    429: "Too many live drill-downs at once; retry after the Retry-After seconds.",
    502: "A store answered with an error.",
    503: "The state database (or the part of the service needed) is unavailable.",
    504: "A store did not answer in time.",
}


class HealthOut(BaseModel):
    """Liveness or readiness."""

    status: Literal["ok", "unavailable"]
    state: str | None = None
    scheduler: str | None = None
