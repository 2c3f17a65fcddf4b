"""Bodies and answers of the repair API; every name and time is checked before it reaches SQL."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from driftgauge.core.instants import Instant as Moment

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]
Text = Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[^\x00]*$")]


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("must carry a time zone (e.g. 2026-03-15T05:00:00Z)")
    if not 1970 <= value.year <= 9998:
        raise ValueError("must fall in the years 1970 to 9998")
    return value


Instant = Annotated[datetime, AfterValidator(_aware)]
Day = Annotated[date, Field(ge=date(1970, 1, 1), le=date(9998, 12, 31))]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WatermarkMove(_Body):
    """Move a pipeline's watermark: to where, by whom and why."""

    to: Instant
    by: Name
    reason: Text
    check: Name | None = None
    stall_after_seconds: float | None = Field(None, gt=0, le=400 * 86400)


class ConsumerIn(_Body):
    """A downstream report, export or model and how to re-trigger it."""

    kind: Literal["report", "export", "model", "other"]
    owner: Name
    rank: int = Field(ge=1, le=1000)
    webhook_url: Annotated[str, Field(pattern=r"^https?://", max_length=2000)] | None = None
    command: Text | None = None
    signs: bool = False
    signed_by: Name | None = None


class PartitionIn(_Body):
    """One partition: [start, end) of event time."""

    start: Instant
    end: Instant


class ReadIn(_Body):
    """A consumer read these partitions of a check."""

    consumer: Name
    check: Name
    partitions: list[PartitionIn] = Field(min_length=1, max_length=10_000)
    read_at: Instant | None = None


class PlanIn(_Body):
    """Plan a backfill of a check's drifting hours."""

    check: Name
    by: Name
    reason: Text
    since: Day | None = None
    until: Day | None = None
    pipeline: Name | None = None


class StepIn(_Body):
    """Who takes a lifecycle step."""

    by: Name


class AnnounceIn(StepIn):
    """Announce: who, and when the recompute will run."""

    runs_at: Instant | None = None


class ReplayIn(StepIn):
    """Replay one consumer, or every unfinished one in rank order."""

    consumer: Name | None = None


class ReplayDone(StepIn):
    """A consumer's re-trigger command finished (or failed)."""

    ok: bool = True
    detail: Annotated[str, Field(max_length=2000)] = ""


class RunIn(_Body):
    """A ledger run that recomputes the backfill's partitions."""

    ledger_run_id: int = Field(ge=1, le=2**63 - 1)


class ProbeIn(_Body):
    """Compare the last two closed ledger runs of one window (latest such window if none)."""

    check: Name
    window_start: Instant | None = None
    window_end: Instant | None = None


class Refusal(BaseModel):
    """Which step a rule refused, the rule's name and why."""

    step: str
    rule: str
    detail: str


class RefusedOut(BaseModel):
    """A refused lifecycle step (409, or 422 when the request can never succeed)."""

    detail: Refusal


# -- answers -------------------------------------------------------------------------------------
# Each answer lists its fields in the order the repair parts build them, so the JSON keeps its
# key order; instants are written with `+00:00`, as the rows' isoformat() writes them.


class WatermarkOut(BaseModel):
    """A pipeline's watermark: how far it is trusted, and who moved it last and why."""

    pipeline: str
    processed_through: Moment
    check: str | None
    stall_after_seconds: float | None
    advanced_at: Moment
    updated_at: Moment
    updated_by: str
    reason: str


class WatermarkMoveOut(BaseModel):
    """One move of a watermark: when, from where to where, by whom and why."""

    model_config = ConfigDict(populate_by_name=True)

    moved_at: Moment
    from_: Moment | None = Field(alias="from")
    to: Moment
    direction: str
    by: str
    reason: str
    backfill_id: int | None


class WatermarkShown(WatermarkOut):
    """A watermark with its latest moves, newest first."""

    moves: list[WatermarkMoveOut]


class ConsumerOut(BaseModel):
    """A consumer: every column of its row, in the table's order."""

    name: str
    kind: str
    owner: str
    rank: int
    webhook_url: str | None
    command: str | None
    signs: bool
    signed_by: str | None
    created_at: Moment
    updated_at: Moment


class ReadsRecorded(BaseModel):
    """How many partition reads were logged."""

    recorded: int


class ReadOut(BaseModel):
    """One logged read of a partition, with what it held when read."""

    consumer: str
    check: str
    start: Moment
    end: Moment
    read_at: Moment
    seen: Any
    backfill_id: int | None


class RunAttached(BaseModel):
    """A ledger run recorded under a backfill."""

    backfill_id: int
    ledger_run_id: int


class RepairBreachOut(BaseModel):
    """A repair breach: its kind, subject, what was found and when."""

    kind: str
    subject: str
    detail: str
    facts: dict[str, Any]
    first_seen: Moment
    last_seen: Moment
    active: bool


class JudgedOut(BaseModel):
    """What one judging found: stalled pipelines, ledger windows probed, silent changes."""

    stalled: list[str]
    ledger_windows: int
    silent_changes: int


class BackfillTargetOut(BaseModel):
    """A partition a backfill repairs, with what it held before, after and when verified."""

    start: Moment
    end: Moment
    run_id: int | None
    before: Any
    after: Any
    verified: Any


class ReplayOut(BaseModel):
    """A consumer's re-trigger under a backfill: its outcome and when it ran."""

    outcome: str
    started_at: Moment | None
    finished_at: Moment | None
    detail: str | None


class BackfillConsumerOut(BaseModel):
    """A consumer that read a backfill's partitions, in rank order, with its replay."""

    name: str
    rank: int
    signs: bool
    kind: str | None
    owner: str | None
    signed_by: str | None
    webhook_url: str | None
    command: str | None
    replay: ReplayOut | None


class BackfillOut(BaseModel):
    """A backfill as listed: its row, its next step, its targets and its consumers."""

    id: int
    check: str
    pipeline: str | None
    status: str
    reason: str
    first_bad: Moment
    reset_to: Moment
    planned_at: Moment
    planned_by: str
    announced_at: Moment | None
    announced_by: str | None
    announcement: str | None
    started_at: Moment | None
    started_by: str | None
    verified_at: Moment | None
    replayed_at: Moment | None
    closed_at: Moment | None
    closed_by: str | None
    totals_before: Any
    totals_after: Any
    diff: Any
    next_step: str
    partitions: list[tuple[Moment, Moment]]
    targets: list[BackfillTargetOut]
    consumers: list[BackfillConsumerOut]


class BackfillEventOut(BaseModel):
    """One step of a backfill's log: done, refused (naming the rule), delivered or not."""

    at: Moment
    step: str
    outcome: str
    rule: str
    by: str
    consumer: str | None
    detail: str


class BackfillShown(BackfillOut):
    """A backfill with the ledger runs of its recompute and its event log."""

    ledger_runs: list[int]
    events: list[BackfillEventOut]


class ProbePartitionOut(BaseModel):
    """One partition after run 1 and after run 2, and the verdict on the step."""

    start: Moment
    end: Moment
    run1: dict[str, Any]
    run2: dict[str, Any]
    verdict: str
    appended: int


class RerunProbed(BaseModel):
    """A rerun probe of a step or of two ledger runs: converged, or rows appended."""

    check: str
    mode: str
    subject: str
    verdict: str
    partitions: list[ProbePartitionOut]


class ProbeOut(RerunProbed):
    """A rerun probe of two closed ledger runs of one window: converged, or rows appended."""

    ledger_runs: list[int]
