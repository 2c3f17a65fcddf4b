"""Pydantic models that mirror the YAML config and reject unknown keys."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, StringConstraints, model_validator

from driftgauge.config.frozen import Drilldown
from driftgauge.config.values import (
    CanaryInterval,
    CheckInterval,
    Cron,
    Keep,
    LedgerSettle,
    NonEmpty,
    NonEmptyList,
    NonEmptyMapping,
    Ratio,
    SecretRef,
    Settle,
    Strict,
    SummaryDeadline,
    between,
)

Heartbeat = Annotated[timedelta, between("1s", "10m")]
LeaseExpiry = Annotated[timedelta, between("2s", "1d")]
CheckName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
FieldTypeName = Literal["string", "integer", "decimal", "boolean", "timestamp"]
KeyTypeName = Literal["string", "integer"]


def _store_union() -> Any:
    """Return the `stores.NAME` model: one member per registered store kind, by `kind`."""
    from driftgauge.stores import registry

    members = tuple(k.config_model for k in registry.kinds().values())
    if len(members) == 1:
        return members[0]
    return Annotated[Union[members], Field(discriminator="kind")]  # noqa: UP007


if TYPE_CHECKING:
    from driftgauge.stores.registry import StoreModel
else:
    StoreModel = _store_union()


class RetentionModel(Strict):
    """How long the state database keeps results that nothing serves any more."""

    runs: Keep = Field(
        timedelta(days=30),
        description="Finished reconciliation runs with "
        "their buckets, drill-down trees and key samples.",
    )
    ledger: Keep = Field(
        timedelta(days=400),
        description="Run-ledger runs, batches, keys, "
        "windows and breaches; canary attempts; vocabulary and volume rows.",
    )


class LeaseModel(Strict):
    """How long a run stays owned by its replica without a heartbeat."""

    heartbeat: Heartbeat = Field(
        timedelta(seconds=15), description="How often a replica renews the runs it owns."
    )
    expires: LeaseExpiry = Field(
        timedelta(seconds=60),
        description="A run not renewed for "
        "this long is marked 'error: interrupted' by any replica "
        "(or the next start).",
    )

    @model_validator(mode="after")
    def _outlasts_a_late_beat(self) -> LeaseModel:
        # One late heartbeat must not cost a live run its lease.
        if self.expires < 2 * self.heartbeat:
            raise ValueError(
                f"expires ({self.expires.total_seconds():g}s) must be at least "
                f"twice heartbeat ({self.heartbeat.total_seconds():g}s)"
            )
        return self


class StateModel(Strict):
    dsn: SecretRef
    schema_name: str = Field("driftgauge", alias="schema", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    retention: RetentionModel = Field(default_factory=RetentionModel)
    lease: LeaseModel = Field(default_factory=LeaseModel)
    max_concurrent_runs: int = Field(
        16,
        ge=1,
        le=500,
        description=(
            "Runs one replica makes at once; a further tick waits its turn, first come first"
            " served. Each running check holds a state-database connection for its lock, so"
            " this, not the number of checks, sizes a replica's state connections."
        ),
    )


class ApiModel(Strict):
    tokens: list[SecretRef] = Field(default_factory=list)
    public_read: bool = True
    sample_keys: int = Field(
        100,
        ge=1,
        le=10_000,
        description="Differing keys a run stores per day bucket and kind (missing, extra, "
        "mismatched); the keys endpoint pages over these, says sampled: true when a day found "
        "more, and still counts every key found in its total.",
    )
    metrics_tokens: list[SecretRef] = Field(
        default_factory=list, description="Tokens that may scrape /metrics only."
    )
    metrics_public: bool | None = Field(
        None, description="/metrics without a token; default: public_read."
    )
    live_concurrency: int = Field(
        4, ge=1, le=64, description="Live drill-downs served at once; more get 429."
    )


class ExclusionModel(Strict):
    reason: str = Field(pattern=r"^[a-z][a-z0-9_]{0,62}$")
    where: NonEmpty | None = Field(None, description="SQL predicate, for a postgres source.")
    query: NonEmptyMapping | None = Field(None, description="Query DSL, for an opensearch source.")


class ViewModel(Strict):
    store: NonEmpty
    query: NonEmpty | None = Field(None, description="postgres: a SELECT whose rows form the view.")
    table: NonEmpty | None = Field(None, description="postgres: a table or view name.")
    index: NonEmpty | None = Field(None, description="opensearch: index, alias or pattern.")
    filter: NonEmptyMapping | None = Field(None, description="opensearch: the reader's query DSL.")
    key: NonEmpty | Annotated[list[NonEmpty], NonEmptyList] = Field(
        description="This side's key column, or a composite key's parts in order: "
        "canonical names, each this side's column through `fields`."
    )
    time: NonEmpty
    fields: dict[NonEmpty, NonEmpty] = Field(
        default_factory=dict,
        description="Canonical field (or composite key part) name to this side's column.",
    )


class ToleranceModel(Strict):
    missing_ratio: float = Field(0.0, ge=0, le=1)
    extra: int = Field(0, ge=0, le=1_000_000_000)
    mismatched: int = Field(0, ge=0, le=1_000_000_000)
    exclusion_rate: dict[NonEmpty, Ratio] = Field(default_factory=dict)


class RecentScheduleModel(Strict):
    every: CheckInterval = timedelta(hours=1)
    days: int = Field(7, ge=1, le=3660)


class FullScheduleModel(Strict):
    every: CheckInterval | None = None
    cron: Cron | None = None
    days: int = Field(400, ge=1, le=36600)


class ScheduleModel(Strict):
    recent: RecentScheduleModel | None = Field(default_factory=RecentScheduleModel)
    full: FullScheduleModel | None = None


class LedgerModel(Strict):
    """How the check's sync job reports to the run ledger."""

    job: str = Field(
        pattern=r"^[a-z][a-z0-9_.-]{0,62}$",
        description="The sync job's name, as it reports to the run ledger.",
    )
    summary_deadline: SummaryDeadline = Field(
        timedelta(hours=6),
        description="How long after a day window ends the job's summary must have arrived.",
    )
    no_match_rate: Ratio = 0.05
    settle: LedgerSettle = Field(
        timedelta(minutes=15),
        description="Delay between a run closing and the reconciliation of its window.",
    )


class CanaryModel(Strict):
    """A sentinel written as the sync job and read back through the reader."""

    store: NonEmpty = Field(description="A store entry holding the sync job's own credentials.")
    index: NonEmpty | None = Field(None, description="Where the job writes; default: reader.index.")
    document: dict[str, Any] = Field(
        default_factory=dict,
        description="Field layout of the sentinel; '{key}', '{now}' and '{token}' are filled in.",
    )
    marker: str = Field("driftgauge_canary", pattern=r"^[A-Za-z_][A-Za-z0-9_.]{0,99}$")
    write: Literal["index", "update"] = "update"
    every: CanaryInterval | None = None
    cron: Cron | None = None
    timeout_seconds: float = Field(30.0, gt=0, le=600)
    key_query: NonEmpty | None = Field(
        None,
        description="postgres source: SELECT returning one real key; $1, $2 = the "
        "previous day's start and end.",
    )


class VocabularyFieldModel(Strict):
    """Where the reader's accepted values of one field come from."""

    accepted: Annotated[list[str | int | bool], NonEmptyList] | None = Field(
        None, description="Values the reader accepts; default: the reader filter's terms."
    )
    filter_field: NonEmpty | None = Field(
        None, description="Field name used in the reader filter; default: the reader column."
    )


class VolumeModel(Strict):
    """The volume band: trailing buckets and the width in standard deviations."""

    trailing: int = Field(30, ge=2, le=3660)
    sigmas: float = Field(3.0, gt=0, le=100)
    min_history: int | None = Field(
        None,
        ge=2,
        le=3660,
        description="Days of source history a day needs before it is judged (at most "
        "trailing); until then it is insufficient_history. Default: 14, or "
        "trailing if smaller.",
    )

    @model_validator(mode="after")
    def _history_fits(self) -> VolumeModel:
        if self.min_history is not None and self.min_history > self.trailing:
            raise ValueError(
                f"min_history ({self.min_history}) must not exceed trailing "
                f"({self.trailing}): a day is judged on its trailing days only"
            )
        return self


class CheckModel(Strict):
    description: str = ""
    source: ViewModel
    reader: ViewModel
    key_type: KeyTypeName | Annotated[list[KeyTypeName], NonEmptyList] = Field(
        "string",
        description="The key's type; a composite key's: one type for every part, "
        "or a list of one type per part, in key order.",
    )
    fields: dict[NonEmpty, FieldTypeName] = Field(default_factory=dict)
    timestamp_precision: Literal["auto", "ms", "us"] = Field(
        "auto",
        description="Precision timestamp fields are compared at; auto: the coarser "
        "side's, found by the schema preflight.",
    )
    measures: list[NonEmpty] = Field(
        default_factory=list,
        description="Fields (integer or decimal) whose exact total every "
        "day and hour bucket carries per side; each side's column through its `fields`.",
    )
    measure_scale: int | None = Field(
        None,
        ge=0,
        le=18,
        description="Digits after the point every measure value holds; "
        "required when a side is opensearch, which sums them as scaled 64-bit integers.",
    )
    row_hash: Literal["auto", "md5", "lookup3"] = Field(
        "auto",
        description="The hash of each row's canonical encoding; auto: lookup3 "
        "(PostgreSQL's hashtextextended, cheaper) when both sides' kinds compute it, else md5.",
    )
    timezone: NonEmpty = "UTC"
    exclusions: list[ExclusionModel] = Field(default_factory=list)
    settle: Settle = timedelta(hours=2)
    tolerance: ToleranceModel = Field(default_factory=ToleranceModel)
    drilldown: Drilldown = Field(default_factory=Drilldown)
    schedule: ScheduleModel = Field(default_factory=ScheduleModel)
    ledger: LedgerModel | None = None
    canary: CanaryModel | None = None
    vocabulary: dict[str, VocabularyFieldModel] = Field(default_factory=dict)
    volume: VolumeModel | None = None


class ConfigModel(Strict):
    stores: dict[NonEmpty, StoreModel]
    state: StateModel
    api: ApiModel = Field(default_factory=ApiModel)
    checks: dict[CheckName, CheckModel]
