"""The simulated world: the day's tasks, a controllable clock, and one scenario's two stores.

Tasks are generated from a seed per day, so every scenario shares the same healthy history
and a fault changes only what it touches. The stores are real: one PostgreSQL database
(the task store and driftgauge's state schema) and one OpenSearch index per scenario.
"""

from __future__ import annotations

import asyncio
import random
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tools/
from tools.local_stores import address

PG_DSN = address("DRIFTGAUGE_TEST_PG_DSN")
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
TIMEOUT = 60.0
START = datetime(2026, 1, 1, tzinfo=UTC)
SEED = 20260101
TIERS = ("first_tier", "second_tier")
UNKNOWN_TIER = "third_tier"
"""The tier value the upstream starts to emit under vocabulary drift; the dashboard's
filter does not know it."""

MAPPING = {
    "properties": {
        "conversation_id": {"type": "keyword"},
        "run_id": {"type": "keyword"},
        "text": {"type": "text"},
        "task_id": {"type": "keyword"},
        "review_tier": {"type": "keyword"},
        "completed_at": {"type": "date"},
        "driftgauge_canary": {"type": "keyword"},
    }
}


@dataclass(frozen=True)
class Shape:
    """The pipeline's proportions (the seed's field ratios by default)."""

    tasks_min: int = 900
    tasks_max: int = 1099
    unjoinable: float = 0.39
    """Share of tasks with no (conversation, run) join key."""
    no_document: float = 0.015
    """Share of keyed tasks whose conversation another writer never indexed."""

    def scaled(self, factor: float) -> Shape:
        """Return the same shape with fewer or more tasks a day."""
        return replace(
            self,
            tasks_min=max(1, round(self.tasks_min * factor)),
            tasks_max=max(1, round(self.tasks_max * factor)),
        )


@dataclass(frozen=True)
class Task:
    """One completed review in the task store."""

    task_id: str
    label: str
    conversation_id: str | None
    run_id: str | None
    """The run id as the upstream emits it (its format may change)."""
    sink_run_id: str | None
    """The run id as the conversation indexer wrote it into the index."""
    completed_at: datetime
    indexed: bool
    """False when another writer never indexed this conversation."""

    def record(self) -> tuple[Any, ...]:
        """Return the task store row."""
        return (
            self.task_id,
            self.label,
            self.conversation_id,
            self.run_id,
            self.completed_at,
            "completed",
        )


def use_epoch(moment: datetime) -> None:
    """Make simulated day 0 start at `moment` (the demo ends its days at today's midnight)."""
    global START
    START = moment


def day_start(day: int) -> datetime:
    """Return the first instant of simulated day `day` (UTC)."""
    return START + timedelta(days=day)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """Return a time of day of simulated day `day`."""
    return day_start(day) + timedelta(hours=hour, minutes=minute)


def new_run_format(run_number: int) -> str:
    """Return a run id in the upstream's new format (after the join-key rename)."""
    return f"RUN/{run_number:07d}"


def tasks_of(day: int, shape: Shape, *, renamed: bool = False, drift: float = 0.0) -> list[Task]:
    """Return the tasks completed on `day`, the same in every scenario unless a fault says.

    `renamed`: the upstream emits run ids in a new format. `drift`: the share of tasks whose
    label is a tier the reader's filter does not know (the same tasks at every rate, so a
    higher rate is a superset of a lower one).
    """
    rng = random.Random(f"{SEED}:{day}")
    drifted = random.Random(f"{SEED}:drift:{day}")
    n = rng.randint(shape.tasks_min, shape.tasks_max)
    out = []
    for i in range(n):
        keyed = rng.random() >= shape.unjoinable
        indexed = rng.random() >= shape.no_document
        label = TIERS[rng.randrange(2)]
        second = rng.randrange(86_400)
        run_number = rng.randrange(1, 10_000)
        if drifted.random() < drift:
            label = UNKNOWN_TIER
        conversation = f"conv-{day:03d}-{i:04d}" if keyed else None
        sink_run = f"r{run_number:04d}" if keyed else None
        run = (new_run_format(run_number) if renamed else sink_run) if keyed else None
        out.append(
            Task(
                f"task-{day:03d}-{i:04d}",
                label,
                conversation,
                run,
                sink_run,
                day_start(day) + timedelta(seconds=second, microseconds=i),
                keyed and indexed,
            )
        )
    return out


_offset: ContextVar[timedelta] = ContextVar("fault_bench_offset", default=timedelta(0))


class SimClock:
    """The bench's clock: a base time it moves forward, plus a per-task offset for jobs."""

    def __init__(self, start: datetime) -> None:
        self._base = start

    def now(self) -> datetime:
        """Return the simulated time as seen by the current task."""
        return self._base + _offset.get()

    @property
    def base(self) -> datetime:
        """Return the simulated time outside any job."""
        return self._base

    def advance_to(self, moment: datetime) -> None:
        """Move the base time forward (never back)."""
        if moment > self._base:
            self._base = moment

    @staticmethod
    def elapse(seconds: float) -> None:
        """Let the current task's own time run on (a job's work, a retry's backoff)."""
        _offset.set(_offset.get() + timedelta(seconds=seconds))

    @staticmethod
    def elapsed() -> timedelta:
        """Return how far the current task's own time has run."""
        return _offset.get()

    @staticmethod
    @contextmanager
    def own_time() -> Iterator[None]:
        """Give the enclosed code its own offset, starting at zero."""
        token = _offset.set(timedelta(0))
        try:
            yield
        finally:
            _offset.reset(token)


def dsn_for(database: str) -> str:
    """Return the server's DSN pointed at another database."""
    return PG_DSN.rsplit("/", 1)[0] + "/" + database


def os_client() -> AsyncOpenSearch:
    """Return an OpenSearch client with a bounded timeout."""
    return AsyncOpenSearch(hosts=[OS_URL], timeout=TIMEOUT, max_retries=0)


@dataclass(frozen=True)
class Stores:
    """One scenario's PostgreSQL database and OpenSearch index."""

    database: str
    index: str

    @property
    def dsn(self) -> str:
        """Return the DSN of the scenario's database."""
        return dsn_for(self.database)


def unique_stores(run_tag: str, scenario: str) -> Stores:
    """Return names no other run or user of the shared stores will pick."""
    tag = scenario.replace("-", "_")
    return Stores(f"dgfb_{run_tag}_{tag}", f"dgfb-{run_tag}-{scenario.replace('_', '-')}")


def run_tag() -> str:
    """Return a random suffix for one bench run's stores."""
    return uuid.uuid4().hex[:8]


async def _admin() -> Any:
    return await asyncpg.connect(PG_DSN, timeout=TIMEOUT)


async def create_stores(stores: Stores) -> None:
    """Create the task table and the conversation index."""
    admin = await _admin()
    try:
        await admin.execute(
            f"CREATE DATABASE \"{stores.database}\" ENCODING 'UTF8' TEMPLATE template0",
            timeout=TIMEOUT,
        )
    finally:
        await admin.close()
    conn = await asyncpg.connect(stores.dsn, timeout=TIMEOUT)
    try:
        await conn.execute(
            "CREATE TABLE tasks (task_id text PRIMARY KEY, label text NOT NULL,"
            " conversation_id text, run_id text, completed_at timestamptz NOT NULL,"
            " status text NOT NULL);"
            " CREATE INDEX tasks_by_time ON tasks (completed_at)",
            timeout=TIMEOUT,
        )
    finally:
        await conn.close()
    client = os_client()
    try:
        await client.indices.create(
            index=stores.index,
            body={
                "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                "mappings": MAPPING,
            },
        )
    finally:
        await client.close()


async def clone_stores(source: Stores, target: Stores) -> None:
    """Copy a finished scenario's stores (tasks, index and driftgauge state) under new names.

    The source must have no open connections; its index gets a write block (clone needs
    one), which the copy drops.
    """
    admin = await _admin()
    try:
        for attempt in range(20):
            try:
                await admin.execute(
                    f'CREATE DATABASE "{target.database}" TEMPLATE "{source.database}"',
                    timeout=TIMEOUT,
                )
                break
            except asyncpg.ObjectInUseError:
                # A session of the source is still closing.
                if attempt == 19:
                    raise
                await asyncio.sleep(0.25)
    finally:
        await admin.close()
    client = os_client()
    try:
        await client.indices.put_settings(index=source.index, body={"index.blocks.write": True})
        await client.indices.clone(
            index=source.index,
            target=target.index,
            body={"settings": {"index.number_of_replicas": 0}},
        )
        await client.indices.put_settings(index=target.index, body={"index.blocks.write": None})
        await client.cluster.health(index=target.index, wait_for_status="green")
    finally:
        await client.close()


async def drop_stores(stores: Stores) -> None:
    """Drop the database and the index (missing ones are fine)."""
    admin = await _admin()
    try:
        await admin.execute(
            f'DROP DATABASE IF EXISTS "{stores.database}" WITH (FORCE)', timeout=TIMEOUT
        )
    finally:
        await admin.close()
    client = os_client()
    try:
        await client.indices.delete(index=stores.index, ignore_unavailable=True)
    finally:
        await client.close()


async def insert_tasks(conn: Any, tasks: Sequence[Task]) -> None:
    """Land completed tasks in the task store."""
    await conn.copy_records_to_table(
        "tasks",
        records=[t.record() for t in tasks],
        columns=("task_id", "label", "conversation_id", "run_id", "completed_at", "status"),
        timeout=TIMEOUT,
    )


def conversation_doc(task: Task) -> dict[str, Any]:
    """Return the conversation document as the conversation indexer writes it (no label)."""
    return {
        "conversation_id": task.conversation_id,
        "run_id": task.sink_run_id,
        "text": f"conversation {task.conversation_id}",
    }


def conversation_id_of(task: Task) -> str:
    """Return the document id the conversation indexer gives a conversation."""
    return f"doc-{task.conversation_id}-{task.sink_run_id}"


async def index_conversations(client: AsyncOpenSearch, index: str, tasks: Sequence[Task]) -> int:
    """Index the conversations of these tasks (another writer's job); return how many."""
    actions = [
        {"_index": index, "_id": conversation_id_of(t), "_source": conversation_doc(t)}
        for t in tasks
        if t.indexed
    ]
    if actions:
        await async_bulk(client, actions, chunk_size=2000, refresh=True, request_timeout=TIMEOUT)
    return len(actions)
