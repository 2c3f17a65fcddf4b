"""The sync job under test: copy the day's review labels onto conversation documents.

It reads the day's completed tasks from the task store, finds each conversation's document
by its join key (conversation, run) with a plain search, writes the label onto it with one
bulk request of scripted updates addressed by `_id` (merged by task id, so a replay is
harmless), counts a no-match as a skip, logs a summary line and reports the run to
driftgauge's run ledger through `LedgerClient`. Its time is simulated: 60 ms per group
and the backoff of its retries; past its 900 s budget the runtime kills it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
from opensearchpy import AsyncOpenSearch, TransportError

from driftgauge.ledger.client import LedgerClient
from driftgauge.ledger.models import RunStatus
from faults.world import TIMEOUT, SimClock, day_start

log = logging.getLogger("fault_bench.syncjob")
JOB = "review-sync"
SECONDS_PER_GROUP = 0.060
TIME_BUDGET = 900.0
CHUNK = 50
"""Groups resolved by one search and written by one bulk request."""
LOOKUP_ATTEMPTS = 10
MERGE = (
    "if (params.task_id.equals(ctx._source.task_id)"
    " && params.tier.equals(ctx._source.review_tier)) { ctx.op = 'noop'; }"
    " else { ctx._source.task_id = params.task_id;"
    " ctx._source.review_tier = params.tier;"
    " ctx._source.completed_at = params.completed_at; }"
)
Mode = Literal["merge", "append"]


class RunKilled(Exception):
    """The runtime killed the job: it outlived its time budget."""


class Throttled(Exception):
    """A lookup was refused with 429 (too many requests); the body says why."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        super().__init__(str(body.get("error", {}).get("reason", "429")))


@dataclass
class Progress:
    """What a run has done so far, for the fault hooks."""

    groups: int
    done: int = 0
    written: int = 0


@dataclass
class Hooks:
    """Where a fault meets the job: before each lookup, after each chunk is written."""

    before_lookup: Callable[[Progress], Awaitable[None]] | None = None
    after_chunk: Callable[[Progress], Awaitable[None]] | None = None


@dataclass
class JobReport:
    """How one run of the job ended, as its own outputs (log line, exit) tell it."""

    day: int
    copy: int
    started_at: datetime
    finished_at: datetime
    input_rows: int
    status: RunStatus | None
    """The status in the summary line; None when the job was killed before printing it."""
    killed: bool = False
    written: int = 0
    no_match: int = 0
    skipped: int = 0
    failed: int = 0
    last_write_at: datetime | None = None
    ledger_run: int | None = None
    line: str = ""
    errors: dict[str, int] = field(default_factory=dict)


@dataclass
class SyncJob:
    """The job's connections and how this deployment of it writes."""

    clock: SimClock
    tasks_pool: Any
    client: AsyncOpenSearch
    """The job's own OpenSearch identity."""
    index: str
    ledger_url: str
    ledger_transport: httpx.AsyncBaseTransport | None = None
    ledger_token: str | None = None
    mode: Mode = "merge"
    hooks: Hooks = field(default_factory=Hooks)

    async def run(self, day: int, copy: int = 0) -> JobReport:
        """Sync the tasks completed on `day`; the run's time starts at the clock's base."""
        with SimClock.own_time():
            started = self.clock.now()
            tasks = await self._read(day)
            report = JobReport(day, copy, started, started, len(tasks), None)
            try:
                await self._sync(day, copy, tasks, report)
            except RunKilled:
                report.killed = True
                log.error(
                    "killed by the runtime",
                    extra={"day": day, "copy": copy, "budget_seconds": TIME_BUDGET},
                )
            report.finished_at = self.clock.now()
            return report

    async def _read(self, day: int) -> list[Any]:
        start = day_start(day)
        async with self.tasks_pool.acquire() as conn:
            rows: list[Any] = await conn.fetch(
                "SELECT task_id, label, conversation_id, run_id, completed_at FROM tasks"
                " WHERE status = 'completed' AND completed_at >= $1 AND completed_at < $2"
                " ORDER BY task_id",
                start,
                start + timedelta(days=1),
                timeout=TIMEOUT,
            )
        return rows

    async def _sync(self, day: int, copy: int, tasks: Sequence[Any], report: JobReport) -> None:
        start = day_start(day)
        keyed = [t for t in tasks if t["conversation_id"] is not None and t["run_id"] is not None]
        progress = Progress(groups=len(keyed))
        async with LedgerClient(
            self.ledger_url,
            job=JOB,
            window_start=start,
            window_end=start + timedelta(days=1),
            input_rows=len(tasks),
            transport=self.ledger_transport,
            token=self.ledger_token,
            timeout=TIMEOUT,
            client_run_id=f"{JOB}-{day}-{copy}-{id(report):x}",
        ) as run:
            report.ledger_run = run.run_id
            report.skipped = len(tasks) - len(keyed)
            if report.skipped:
                await run.count("skipped", report.skipped, "no_join_key")
            for i in range(0, len(keyed), CHUNK):
                chunk = keyed[i : i + CHUNK]
                found = await self._lookup(chunk, progress)
                if found is None:
                    errors = {t["task_id"]: "too_many_requests" for t in chunk}
                    report.failed += len(errors)
                    report.errors["too_many_requests"] = report.errors.get(
                        "too_many_requests", 0
                    ) + len(errors)
                    await run.failed(errors)
                else:
                    await self._write(chunk, found, run, report)
                SimClock.elapse(SECONDS_PER_GROUP * len(chunk))
                progress.done += len(chunk)
                progress.written = report.written
                self._within_budget()
                if self.hooks.after_chunk is not None:
                    await self.hooks.after_chunk(progress)
            await self._refresh()
            report.status = job_status(report)
            report.line = (
                f"status={report.status} updated={report.written} "
                f"no_docs_matched={report.no_match} skipped={report.skipped} "
                f"failed={report.failed}"
            )
            log.info(report.line, extra={"day": day, "copy": copy})
            await run.close(status=report.status, message=report.line)

    def _within_budget(self) -> None:
        if SimClock.elapsed() > timedelta(seconds=TIME_BUDGET):
            raise RunKilled(f"the run exceeded its {TIME_BUDGET:g}s budget")

    async def _lookup(self, chunk: Sequence[Any], progress: Progress) -> dict[str, str] | None:
        """Return task id → document id for the chunk's join keys, or None after 429s."""
        for attempt in range(LOOKUP_ATTEMPTS):
            try:
                if self.hooks.before_lookup is not None:
                    await self.hooks.before_lookup(progress)
                return await self._search(chunk)
            except Throttled as exc:
                log.warning("lookup throttled", extra={"attempt": attempt + 1, "error": exc.body})
                SimClock.elapse(min(2.0**attempt, 60.0))
                self._within_budget()
        return None

    async def _search(self, chunk: Sequence[Any]) -> dict[str, str]:
        convs = sorted({t["conversation_id"] for t in chunk})
        runs = sorted({t["run_id"] for t in chunk})
        try:
            resp = await self.client.search(
                index=self.index,
                body={
                    "size": 4 * len(chunk),
                    "track_total_hits": True,
                    "_source": ["conversation_id", "run_id", "task_id"],
                    "query": {
                        "bool": {
                            "filter": [
                                {"terms": {"conversation_id": convs}},
                                {"terms": {"run_id": runs}},
                            ]
                        }
                    },
                },
            )
        except TransportError as exc:
            if exc.status_code == 429:
                raise Throttled(exc.info if isinstance(exc.info, dict) else {}) from exc
            raise
        hits = resp["hits"]["hits"]
        if resp["hits"]["total"]["value"] != len(hits):
            # A size cap that silently drops documents would look like no-matches.
            raise RuntimeError(
                f"lookup returned {len(hits)} of {resp['hits']['total']['value']} documents"
            )
        by_pair: dict[tuple[str, str], str] = {}
        for h in sorted(hits, key=lambda h: "task_id" in h["_source"]):
            src = h["_source"]
            by_pair.setdefault((src["conversation_id"], src["run_id"]), h["_id"])
        return {
            t["task_id"]: by_pair[(t["conversation_id"], t["run_id"])]
            for t in chunk
            if (t["conversation_id"], t["run_id"]) in by_pair
        }

    async def _write(
        self, chunk: Sequence[Any], found: dict[str, str], run: LedgerClient, report: JobReport
    ) -> None:
        missing = {t["task_id"]: "no_document" for t in chunk if t["task_id"] not in found}
        report.no_match += len(missing)
        if missing:
            await run.no_match(missing)
        todo = [t for t in chunk if t["task_id"] in found]
        if not todo:
            return
        body: list[dict[str, Any]] = []
        for t in todo:
            when = t["completed_at"].astimezone(UTC).isoformat()
            if self.mode == "merge":
                body.append(
                    {
                        "update": {
                            "_index": self.index,
                            "_id": found[t["task_id"]],
                            "retry_on_conflict": 5,
                        }
                    }
                )
                body.append(
                    {
                        "script": {
                            "lang": "painless",
                            "source": MERGE,
                            "params": {
                                "task_id": t["task_id"],
                                "tier": t["label"],
                                "completed_at": when,
                            },
                        }
                    }
                )
            else:
                # Append: a new label document per write, so a replay adds a copy.
                body.append({"index": {"_index": self.index}})
                body.append(
                    {
                        "conversation_id": t["conversation_id"],
                        "run_id": t["run_id"],
                        "task_id": t["task_id"],
                        "review_tier": t["label"],
                        "completed_at": when,
                    }
                )
        resp = await self.client.bulk(body=body)
        ok: list[str] = []
        failed: dict[str, str] = {}
        for t, item in zip(todo, resp["items"], strict=True):
            result = next(iter(item.values()))
            if result.get("status", 500) < 300:
                ok.append(t["task_id"])
            else:
                # Count failures per group, so the ledger adds up even when the bulk
                # request itself "succeeds" with per-item errors.
                kind = str((result.get("error") or {}).get("type", "error"))
                failed[t["task_id"]] = kind
                report.errors[kind] = report.errors.get(kind, 0) + 1
        report.written += len(ok)
        report.failed += len(failed)
        if ok:
            report.last_write_at = self.clock.now()
            await run.written(ok)
        if failed:
            await run.failed(failed)

    async def _refresh(self) -> None:
        try:
            await self.client.indices.refresh(index=self.index)
        except TransportError as exc:
            log.warning("refresh failed", extra={"status": exc.status_code})


def job_status(report: JobReport) -> RunStatus:
    """Return the status the job prints: it knows its write errors, not its empty writes."""
    if report.failed:
        return "partial_failure" if report.written else "failed"
    return "success"
