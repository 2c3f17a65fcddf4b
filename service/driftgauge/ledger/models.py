"""Payloads of the run-ledger API: what a sync job sends and what it gets back."""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from driftgauge.core.bounds import no_lone_surrogates, sane_instant
from driftgauge.core.instants import Instant

Outcome = Literal["written", "no_match", "skipped", "failed"]
RunStatus = Literal["success", "partial_failure", "failed"]
Rule = Literal[
    "missing_summary",
    "duplicate_summary",
    "failed_writes",
    "nothing_written",
    "no_match_rate",
    "outcomes_mismatch",
    "status_mismatch",
    "written_exceeds_handed",
]
RULES: tuple[Rule, ...] = get_args(Rule)
MAX_KEYS_PER_BATCH = 10_000

Label = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_.:-]*$")]
# PostgreSQL text cannot hold NUL: refuse it here as a 422 naming the field.
NO_NUL = r"^[^\x00]*$"
Ident = Annotated[str, Field(min_length=1, max_length=100, pattern=NO_NUL)]


class Payload(BaseModel):
    """Base of every request body: unknown keys are errors, text must be valid Unicode."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _valid_text(cls, value: Any) -> Any:
        return no_lone_surrogates(value)


class RunOpen(Payload):
    """Open a run: which job, the window of source rows it covers, how many it was handed."""

    job: Annotated[str, Field(min_length=1, max_length=63, pattern=NO_NUL)]
    window_start: AwareDatetime
    window_end: AwareDatetime
    input_rows: int = Field(ge=0, le=10**12)
    client_run_id: Ident | None = Field(
        None, description="The job's own id for this run; a retried open returns the same run."
    )

    @field_validator("window_start", "window_end")
    @classmethod
    def _sane(cls, moment: datetime) -> datetime:
        # A day far out (9999-12-31) would overflow every later judgement of its window.
        return sane_instant(moment)

    @field_validator("window_end")
    @classmethod
    def _after_start(cls, end: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("window_start")
        if start is not None and end <= start:
            raise ValueError("must be after window_start")
        return end


def _needs_detail(outcome: str | None, value: str | None, field: str) -> str | None:
    """Require `reason` for no_match/skipped and `error` for failed; forbid them otherwise."""
    wanted = {"reason": ("no_match", "skipped"), "error": ("failed",)}[field]
    if outcome is None:
        return value
    if outcome in wanted and value is None:
        raise ValueError(f"required when outcome is {outcome}")
    if outcome not in wanted and value is not None:
        raise ValueError(f"not allowed when outcome is {outcome}")
    return value


class _Outcomed(Payload):
    outcome: Outcome
    reason: Label | None = Field(
        None, validate_default=True, description="Why: required for no_match and skipped."
    )
    error: Label | None = Field(
        None, validate_default=True, description="The error class: required for failed."
    )

    @field_validator("reason", "error")
    @classmethod
    def _detail(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _needs_detail(info.data.get("outcome"), value, info.field_name or "reason")

    @property
    def detail(self) -> str:
        """Return the reason or error class ('' for written)."""
        return self.reason or self.error or ""


class KeyOutcome(_Outcomed):
    """Where one input row ended up, by its key."""

    key: Annotated[str, Field(min_length=1, max_length=1000, pattern=NO_NUL)]


class CountOutcome(_Outcomed):
    """How many input rows ended up the same way (when keys are too many to list)."""

    count: int = Field(ge=1, le=10**12)


class Batch(Payload):
    """A batch of outcomes; `batch_id` makes a retried request count once."""

    batch_id: Ident
    keys: list[KeyOutcome] = Field(default_factory=list, max_length=MAX_KEYS_PER_BATCH)
    counts: list[CountOutcome] = Field(default_factory=list, max_length=1000)

    @model_validator(mode="after")
    def _not_empty(self) -> Batch:
        if not self.keys and not self.counts:
            raise ValueError("a batch needs at least one entry in 'keys' or 'counts'")
        return self

    def fingerprint(self) -> str:
        """Return a hash of the batch's content, to tell a retry from a different batch."""
        body = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()

    def totals(self) -> dict[tuple[str, str], int]:
        """Return rows per (outcome, reason or error class) in this batch."""
        out: dict[tuple[str, str], int] = {}
        for k in self.keys:
            out[(k.outcome, k.detail)] = out.get((k.outcome, k.detail), 0) + 1
        for c in self.counts:
            out[(c.outcome, c.detail)] = out.get((c.outcome, c.detail), 0) + c.count
        return out


class Counts(Payload):
    """Rows per outcome."""

    written: int = Field(0, ge=0, le=10**12)
    no_match: int = Field(0, ge=0, le=10**12)
    skipped: int = Field(0, ge=0, le=10**12)
    failed: int = Field(0, ge=0, le=10**12)

    @property
    def total(self) -> int:
        """Return the rows over every outcome."""
        return self.written + self.no_match + self.skipped + self.failed

    @property
    def looked_up(self) -> int:
        """Return the rows the job looked a document up for (every outcome but skipped)."""
        return self.written + self.no_match + self.failed

    def __add__(self, other: Counts) -> Counts:
        # A sum is not a request body: it is not held to the body's bounds (nor re-checked).
        return Counts.model_construct(
            written=self.written + other.written,
            no_match=self.no_match + other.no_match,
            skipped=self.skipped + other.skipped,
            failed=self.failed + other.failed,
        )


class Summary(Payload):
    """The job's own summary line, sent when the run ends."""

    status: RunStatus
    counts: Counts | None = Field(None, description="The job's own counts, if it keeps them.")
    message: Annotated[str, Field(max_length=2000, pattern=NO_NUL)] | None = None


class Acknowledge(Payload):
    """Who acknowledges a breach, and why: it then leaves the open breaches for good."""

    by: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00]*\S[^\x00]*$")]
    reason: Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[^\x00]*\S[^\x00]*$")]


class Acknowledgement(BaseModel):
    """A recorded acknowledgement of a breach."""

    by: str
    reason: str
    at: Instant


class RunOut(BaseModel):
    """A ledger run as the API returns it."""

    id: int
    job: str
    client_run_id: str | None
    window_start: Instant
    window_end: Instant
    window_day: date
    input_rows: int
    opened_at: Instant
    closed_at: Instant | None
    status: RunStatus | None
    outcomes: Counts
    reasons: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="Rows per reason (or error class) per outcome."
    )
    summary: dict[str, Any] | None = None
    batches: int = 0


class BatchOut(BaseModel):
    """What a batch did to its run."""

    run_id: int
    batch_id: str
    duplicate: bool = Field(description="True when this batch id was already counted.")
    outcomes: Counts


class BreachOut(BaseModel):
    """One rule a job window breached."""

    job: str
    window_day: date
    rule: Rule
    detail: str
    first_seen: Instant
    last_seen: Instant
    active: bool
    acknowledged: Acknowledgement | None = Field(
        None, description="Set once someone acknowledged the breach through the API."
    )


class WindowOut(BaseModel):
    """A job window as last evaluated, with the rules it breaches now."""

    job: str
    window_day: date
    due: bool
    evaluated_at: Instant
    breaches: list[Rule]


class LedgerKeyOut(BaseModel):
    """A key a run reported as no_match, skipped or failed."""

    key: str
    outcome: Outcome
    reason: str
    batch_id: str
