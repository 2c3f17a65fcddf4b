"""The nine faults, each done to the real stores where it can be.

A fault switches on at the start of its onset day. It may change the tasks the upstream
produces from then on, act on the stores at onset or on a daily schedule, or change how
the sync job runs (copies, write mode, trouble met mid-run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from faults.syncjob import Hooks, Mode, Progress, Throttled
from faults.world import (
    SEED,
    TIMEOUT,
    Shape,
    SimClock,
    Task,
    tasks_of,
)


class World(Protocol):
    """What a fault may touch: the clock, the stores and the sink's admin client."""

    clock: SimClock
    client: AsyncOpenSearch
    index: str
    tasks_pool: Any


@dataclass(frozen=True)
class JobPlan:
    """How the day's sync runs: how many concurrent copies, how it writes, what it meets."""

    copies: int = 1
    mode: Mode = "merge"
    hooks: Hooks = field(default_factory=Hooks)


Event = tuple[int, int, Callable[[World, int], Awaitable[None]]]
"""(hour, minute, action): something a fault does every day from its onset on."""


class Fault:
    """A healthy pipeline; each fault overrides what it changes."""

    name = "healthy"
    title = "healthy baseline"
    deploy = False
    """True when the fault arrives with a deploy of the job (the canary runs after it)."""
    how = "nothing"
    """How the bench produces the fault, for the results page."""
    damage = 0.0
    """Hours from onset until the fault first does harm (a sync run or a store change)."""

    def tasks(self, day: int, shape: Shape, onset: int) -> list[Task]:
        """Return the tasks completed on `day`."""
        return tasks_of(day, shape)

    async def switch_on(self, world: World) -> None:
        """Act on the stores at onset."""

    def events(self) -> list[Event]:
        """Return what the fault does every day from onset."""
        return []

    def job(self, world: World) -> JobPlan:
        """Return how a sync run started while the fault is on behaves."""
        return JobPlan()


class PermissionLoss(Fault):
    """The job's role loses its write permission with a deploy: writes fail with 403."""

    name = "permission_loss"
    title = "permission loss"
    damage = 1.0
    deploy = True
    how = "index write block (`index.blocks.write`): every write of the job fails 403"

    async def switch_on(self, world: World) -> None:
        """Block writes to the index."""
        await world.client.indices.put_settings(
            index=world.index, body={"index.blocks.write": True}
        )


class KeyRename(Fault):
    """The upstream changes its run-id format: every lookup matches nothing."""

    name = "key_rename"
    title = "join-key rename"
    damage = 25.0
    how = "tasks from onset carry run ids in a new format (`RUN/0001234` for `r1234`)"

    def tasks(self, day: int, shape: Shape, onset: int) -> list[Task]:
        """Return the day's tasks, renamed from onset."""
        return tasks_of(day, shape, renamed=day >= onset)


class VocabularyDrift(Fault):
    """Some labels carry a tier the dashboard's filter does not know."""

    name = "vocabulary_drift"
    title = "vocabulary drift"
    damage = 25.0

    def __init__(self, rate: float = 0.25) -> None:
        self.rate = rate
        self.how = (
            f"{rate:.0%} of tasks from onset are labelled `third_tier`; the reader's "
            "filter asks for first_tier and second_tier"
        )

    def tasks(self, day: int, shape: Shape, onset: int) -> list[Task]:
        """Return the day's tasks, drifted from onset."""
        return tasks_of(day, shape, drift=self.rate if day >= onset else 0.0)


class SourceTtl(Fault):
    """The task store starts deleting old rows; the index keeps them."""

    name = "source_ttl"
    title = "source TTL"
    damage = 0.5

    def __init__(self, days: int = 14) -> None:
        self.days = days
        self.how = f"daily at 00:30, `DELETE FROM tasks` older than {days} days"

    def events(self) -> list[Event]:
        """Delete expired tasks every night."""
        return [(0, 30, self._expire)]

    async def _expire(self, world: World, day: int) -> None:
        cutoff = world.clock.now() - timedelta(days=self.days)
        async with world.tasks_pool.acquire() as conn:
            await conn.execute("DELETE FROM tasks WHERE completed_at < $1", cutoff, timeout=TIMEOUT)


class DiskFull(Fault):
    """The node crosses its flood stage during the job's writes: the index turns read-only."""

    name = "disk_full"
    title = "disk full"
    damage = 1.0
    how = (
        "once the first run after onset has written 40% of its groups, the index gets the "
        "flood-stage block `index.blocks.read_only_allow_delete`; writes fail from then on"
    )

    def __init__(self, share: float = 0.4) -> None:
        self.share = share
        self.blocked = False

    def job(self, world: World) -> JobPlan:
        """Return a run that fills the disk part way."""

        async def after_chunk(progress: Progress) -> None:
            if not self.blocked and progress.done >= self.share * progress.groups:
                self.blocked = True
                await world.client.indices.put_settings(
                    index=world.index, body={"index.blocks.read_only_allow_delete": True}
                )

        return JobPlan(hooks=Hooks(after_chunk=after_chunk))


class Scroll429(Fault):
    """The job's lookups are refused with 429 part way; retries outlive its time budget."""

    name = "scroll_429"
    title = "scroll 429s"
    damage = 1.0
    how = (
        "from 37% of its groups on, every lookup of the job is refused with a 429 "
        "(injected in the job's client: exhausting the real node-wide scroll-context "
        "limit would hit everyone sharing the node); backoff runs it past its 900 s "
        "budget and the runtime kills it"
    )

    def __init__(self, share: float = 0.37) -> None:
        self.share = share

    def job(self, world: World) -> JobPlan:
        """Return a run whose lookups start failing part way."""

        async def before_lookup(progress: Progress) -> None:
            if progress.done >= self.share * progress.groups:
                raise Throttled(
                    {
                        "error": {
                            "type": "rejected_execution_exception",
                            "reason": "Trying to create too many scroll contexts. Must be less "
                            "than or equal to: [500]. This limit can be set by changing the "
                            "[search.max_open_scroll_context] setting.",
                        },
                        "status": 429,
                    }
                )

        return JobPlan(hooks=Hooks(before_lookup=before_lookup))


class RetryMerge(Fault):
    """Three concurrent copies of each run (a CLI re-sends); writes merge by task id."""

    name = "retry_merge"
    title = "retry \u00d73, merge"
    damage = 1.0
    how = "each run starts three times concurrently; scripted updates merge by task id"

    def job(self, world: World) -> JobPlan:
        """Return three merging copies."""
        return JobPlan(copies=3)


class RetryAppend(Fault):
    """Three concurrent copies of each run, each appending its label documents."""

    name = "retry_append"
    title = "retry \u00d73, append"
    damage = 1.0
    how = "each run starts three times concurrently; each copy appends a label document"

    def job(self, world: World) -> JobPlan:
        """Return three appending copies."""
        return JobPlan(copies=3, mode="append")


class LostUpdate(Fault):
    """A second writer re-indexes some conversations whole, erasing their labels."""

    name = "lost_update"
    title = "lost update"
    damage = 6.0

    def __init__(self, per_day: int = 100) -> None:
        self.per_day = per_day
        self.how = (
            f"daily at 06:00 the conversation indexer re-indexes {per_day} labelled "
            "documents whole (a full replace without the label fields)"
        )

    def events(self) -> list[Event]:
        """Overwrite some labelled documents every morning."""
        return [(6, 0, self._overwrite)]

    async def _overwrite(self, world: World, day: int) -> None:
        resp = await world.client.search(
            index=world.index,
            body={
                "size": self.per_day,
                "_source": ["conversation_id", "run_id"],
                "query": {
                    "function_score": {
                        "query": {
                            "bool": {
                                "filter": [
                                    {"exists": {"field": "task_id"}},
                                    {"exists": {"field": "conversation_id"}},
                                ]
                            }
                        },
                        "random_score": {"seed": SEED + day, "field": "_seq_no"},
                        # The filter scores 0; without "replace" every score ties and the oldest
                        # documents would always be the ones picked.
                        "boost_mode": "replace",
                    }
                },
            },
        )
        actions = []
        for hit in resp["hits"]["hits"]:
            src = hit["_source"]
            actions.append(
                {
                    "_index": world.index,
                    "_id": hit["_id"],
                    "_source": {
                        "conversation_id": src["conversation_id"],
                        "run_id": src["run_id"],
                        "text": f"conversation {src['conversation_id']} (re-indexed)",
                    },
                }
            )
        if actions:
            await async_bulk(world.client, actions, refresh=True, request_timeout=TIMEOUT)


def all_faults(drift_rate: float = 0.25) -> list[Fault]:
    """Return the nine faults in the seed's order."""
    return [
        PermissionLoss(),
        KeyRename(),
        VocabularyDrift(drift_rate),
        SourceTtl(),
        DiskFull(),
        Scroll429(),
        RetryMerge(),
        RetryAppend(),
        LostUpdate(),
    ]


def by_name(name: str, drift_rate: float = 0.25) -> Fault:
    """Return a fresh fault by its name ('healthy' for none)."""
    if name == Fault.name:
        return Fault()
    for fault in all_faults(drift_rate):
        if fault.name == name:
            return fault
    raise ValueError(f"no fault named {name!r}")
