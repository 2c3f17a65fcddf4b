"""The ledger rules: pure judgements of one job window from what its runs reported."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from driftgauge.ledger.models import Counts, Rule, RunStatus


@dataclass(frozen=True)
class RunFacts:
    """What the ledger knows about one run: input, recorded outcomes and the job's summary."""

    run_id: int
    input_rows: int
    outcomes: Counts = field(default_factory=Counts)
    status: RunStatus | None = None
    """The job's reported status; None while the run has no summary."""
    summary_counts: Counts | None = None
    """The counts the job put in its summary, if any."""

    @property
    def closed(self) -> bool:
        """Return True once the job sent its summary."""
        return self.status is not None

    @property
    def most_written(self) -> int:
        """Return the larger of the written rows reported and those the summary claims."""
        claimed = self.summary_counts.written if self.summary_counts is not None else 0
        return max(self.outcomes.written, claimed)


@dataclass(frozen=True)
class WindowFacts:
    """All runs of one job whose window starts in one day bucket."""

    job: str
    day: date
    due: bool
    """True once the day's summary deadline has passed."""
    runs: tuple[RunFacts, ...] = ()
    watched: bool = True
    """False when the window ended before the ledger began watching the job: the job may
    have reported it before the ledger existed, so a window with no run proves nothing."""


def derive_status(input_rows: int, outcomes: Counts) -> RunStatus:
    """Return the status the counts imply: empty output from non-empty input is not success."""
    if outcomes.failed:
        return "partial_failure" if outcomes.written else "failed"
    if input_rows and not outcomes.written:
        return "failed"
    return "success"


def window_bounds(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """Return the [start, end) of a local day (DST-safe)."""
    nxt = day + timedelta(days=1)
    return (
        datetime(day.year, day.month, day.day, tzinfo=tz),
        datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz),
    )


def window_day(moment: datetime, tz: ZoneInfo) -> date:
    """Return the day bucket a run belongs to: the local date its window starts on."""
    return moment.astimezone(tz).date()


def latest_due_day(now: datetime, tz: ZoneInfo, deadline: timedelta) -> date:
    """Return the most recent day whose summary deadline (its end + `deadline`) has passed."""
    day = now.astimezone(tz).date()
    while window_bounds(day, tz)[1] + deadline > now:
        day -= timedelta(days=1)
    return day


def _ids(runs: Sequence[RunFacts]) -> str:
    return ", ".join(str(r.run_id) for r in runs)


def evaluate(window: WindowFacts, no_match_rate: float) -> dict[Rule, str]:
    """Return every rule the window breaches, each with a one-line explanation."""
    out: dict[Rule, str] = {}
    closed = [r for r in window.runs if r.closed]
    open_runs = [r for r in window.runs if not r.closed]
    if window.due and not window.runs and not window.watched:
        pass
    elif window.due and not closed:
        out["missing_summary"] = (
            "no run reported for the window"
            if not window.runs
            else f"no summary by the deadline (open runs: {_ids(open_runs)})"
        )
    elif window.due and open_runs:
        out["missing_summary"] = f"runs {_ids(open_runs)} never sent a summary"
    if len(closed) > 1:
        out["duplicate_summary"] = f"{len(closed)} summaries in one window (runs {_ids(closed)})"
    total = Counts()
    for r in window.runs:
        total = total + r.outcomes
    if total.failed:
        out["failed_writes"] = f"{total.failed} rows failed to write"
    empty = [r for r in closed if r.input_rows and not r.outcomes.written]
    if empty:
        out["nothing_written"] = f"runs {_ids(empty)} wrote 0 of a non-empty input"
    # The rate is over lookups: a row skipped (e.g. for having no join key) never looked
    # for a document, and counting it would dilute a key rename below the limit.
    looked_up = sum(r.outcomes.looked_up for r in closed)
    matched_none = sum(r.outcomes.no_match for r in closed)
    if looked_up and matched_none / looked_up > no_match_rate:
        out["no_match_rate"] = (
            f"{matched_none} of {looked_up} looked-up rows matched no "
            f"document ({matched_none / looked_up:.2%} > "
            f"{no_match_rate:.2%})"
        )
    over = [r for r in window.runs if r.most_written > r.input_rows]
    if over:
        r = over[0]
        out["written_exceeds_handed"] = (
            f"run {r.run_id} wrote {r.most_written} rows but was handed {r.input_rows}"
        )
    unbalanced = [
        r
        for r in closed
        if r.outcomes.total != r.input_rows
        or (r.summary_counts is not None and r.summary_counts != r.outcomes)
    ]
    if unbalanced:
        r = unbalanced[0]
        why = (
            f"outcomes add up to {r.outcomes.total}, input was {r.input_rows}"
            if r.outcomes.total != r.input_rows
            else "the summary's counts differ from the outcomes reported"
        )
        out["outcomes_mismatch"] = f"run {r.run_id}: {why}"
    wrong = [r for r in closed if r.status != derive_status(r.input_rows, r.outcomes)]
    if wrong:
        r = wrong[0]
        out["status_mismatch"] = (
            f"run {r.run_id} reported {r.status}; its counts say "
            f"{derive_status(r.input_rows, r.outcomes)}"
        )
    return out
