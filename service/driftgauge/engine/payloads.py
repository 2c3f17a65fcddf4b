"""The engine's results as JSON payloads, declared once: the CLI prints them, the API serves them.

Field order is the JSON's key order; the docstrings and descriptions are the OpenAPI text.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

BucketStatus = Literal["ok", "drift", "settling", "error"]
DriftKind = Literal["missing", "extra", "mismatched"]
DayStrategy = Literal["aggregates", "digests", "day_digests", "rows", "slots", "drill"]
"""How a day was judged (docs/algorithm.md, "Each day's strategy"): on its day aggregates
alone; by peeling the first pass's difference digests; by a scan of the day alone for its
digests; by reading and joining all its keys and row hashes; by time slots; or by
key-hash prefixes."""
ShownKey = Annotated[
    str | list[str | int | None] | None,
    Field(description="The key's text, a composite key's parts as an array; null for a NULL key."),
]
"""A differing key as every payload shows it (see encoding.digest.shown_key)."""


class AggregateOut(BaseModel):
    """Count, distinct keys and digest of one side."""

    count: int
    distinct_keys: int
    digest: str = Field(description="Sum of row hashes mod 2^64, 16 hex digits.")
    measures: dict[str, str] | None = Field(
        None,
        description="Each measure's exact total as decimal text; null where the check "
        "declares none or this level does not sum them (key-hash prefixes).",
    )


class NodeOut(BaseModel):
    """A drill-down node: an hour or a key-hash prefix."""

    level: Literal["hour", "prefix"]
    label: str = Field(description="The hour's start (ISO 8601) or a hex key-hash prefix.")
    differs: bool
    fetched: bool
    source: AggregateOut
    reader: AggregateOut
    children: list[NodeOut] = Field(default_factory=list)


class BucketResultOut(BaseModel):
    """One day bucket of a run: counts, both sides' aggregates, status and reasons."""

    day: str
    start: str
    status: BucketStatus
    expected: int
    visible: int
    excluded: dict[str, int]
    missing: int
    extra: int
    mismatched: int
    duplicates: int
    source: AggregateOut
    reader: AggregateOut
    reasons: list[str]
    strategy: DayStrategy | None = Field(
        None, description="How the day was judged; null for runs recorded before it was kept."
    )
    strategy_reason: str | None = Field(None, description="Why the planner chose it.")


class DrillKeyOut(BaseModel):
    """One differing key found live at a drill-down leaf."""

    key: ShownKey
    kind: DriftKind
    source_copies: int
    reader_copies: int
    event_time: str | None


class DrillOut(BaseModel):
    """One level of a live drill-down below (day, hour, prefix), and the keys at a leaf."""

    check: str
    day: str
    hour: str | None
    start: str
    end: str
    prefix: str | None
    level: Literal["hour", "prefix"]
    differs: bool
    nodes: list[NodeOut]
    keys: list[DrillKeyOut] = Field(default_factory=list)
    unexplained: str | None = None
