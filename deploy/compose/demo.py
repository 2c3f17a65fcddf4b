"""The compose demo: plant a silent fault in the stack's stores and show driftgauge finding it.

A task store (PostgreSQL) feeds a search index (OpenSearch) that a dashboard reads with
its own filter. For fourteen days the sync is healthy; from day 10 the upstream starts
emitting a tier the dashboard's filter does not know (vocabulary drift), on day 12 a
retried run appends three copies of a few documents, and one label is overwritten by a
second writer. Every component stays green; driftgauge does not.

It lives outside the package (it drops and recreates its database) and runs in the
driftgauge image from a bind mount: `python /opt/driftgauge-demo/demo.py`.
"""

from __future__ import annotations

import asyncio
import random
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tools/
from tools.local_stores import address

from driftgauge.cli.render import ProgressBar, render_drill, render_run
from driftgauge.configfile.loader import load_text
from driftgauge.engine.live import drill_live
from driftgauge.engine.reconcile import reconcile

PG = address("DRIFTGAUGE_TEST_PG_DSN")
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
DB = "driftgauge_demo"
INDEX = "driftgauge-demo-conversations"
DAYS = 14
FAULT_DAY = 10
START = date(2026, 3, 1)

CONFIG = """
stores:
  tasks_db: {{kind: postgres, dsn: "{pg}"}}
  search: {{kind: opensearch, url: "{os}"}}
state: {{dsn: "{state}"}}
api: {{tokens: ["demo-token"], public_read: true}}
checks:
  reviews:
    description: Completed reviews must be visible on the first/second-tier dashboard.
    source:
      store: tasks_db
      query: SELECT task_id, label, conversation_key, completed_at FROM tasks
      key: task_id
      time: completed_at
    reader:
      store: search
      index: {index}
      filter: {{terms: {{review_tier: [first_tier, second_tier]}}}}
      key: task_id
      time: completed_at
      fields: {{label: review_tier}}
    fields: {{label: string}}
    timezone: UTC
    exclusions:
      - {{reason: no_join_key, where: conversation_key IS NULL}}
    settle: 0s
    tolerance: {{exclusion_rate: {{no_join_key: 0.6}}}}
    schedule: {{recent: {{every: 30s, days: {days}}}}}
"""


def _tasks() -> list[tuple[str, str, str | None, datetime]]:
    rnd = random.Random(20260301)
    rows = []
    for d in range(DAYS):
        day = datetime(START.year, START.month, START.day, tzinfo=UTC) + timedelta(days=d)
        for i in range(rnd.randint(900, 1099)):
            tier = rnd.choice(["first_tier", "second_tier"])
            if d >= FAULT_DAY and rnd.random() < 0.03:
                tier = "third_tier"  # the upstream's new value
            key = None if rnd.random() < 0.39 else f"conv-{d}-{i}"
            when = day + timedelta(seconds=rnd.randint(0, 86399))
            rows.append((f"task-{d:02d}-{i:04d}", tier, key, when))
    return rows


async def _load_source(rows: list[tuple[str, str, str | None, datetime]]) -> None:
    import asyncpg

    admin = await asyncpg.connect(PG)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{DB}"')
    finally:
        await admin.close()
    conn = await asyncpg.connect(_dsn(DB))
    try:
        await conn.execute(
            "CREATE TABLE tasks (task_id text PRIMARY KEY, label text NOT NULL, "
            "conversation_key text, completed_at timestamptz NOT NULL)"
        )
        await conn.copy_records_to_table("tasks", records=rows)
    finally:
        await conn.close()


async def _sync_index(rows: list[tuple[str, str, str | None, datetime]]) -> None:
    from opensearchpy import AsyncOpenSearch
    from opensearchpy.helpers import async_bulk

    client = AsyncOpenSearch(OS_URL, timeout=60)
    try:
        await client.indices.delete(index=INDEX, ignore_unavailable=True)
        await client.indices.create(
            index=INDEX,
            body={
                "mappings": {
                    "properties": {
                        "task_id": {"type": "keyword"},
                        "review_tier": {"type": "keyword"},
                        "conversation_key": {"type": "keyword"},
                        "completed_at": {"type": "date"},
                    }
                }
            },
        )
        docs: list[dict[str, Any]] = []
        for task_id, tier, key, when in rows:
            if key is None:
                continue  # no join key: the sync can never place it
            doc = {
                "task_id": task_id,
                "review_tier": tier,
                "conversation_key": key,
                "completed_at": when.isoformat(),
            }
            docs.append({"_index": INDEX, "_id": task_id, "_source": doc})
            if task_id.startswith(f"task-{FAULT_DAY + 2:02d}-00") and task_id[-1] in "357":
                for copy in (1, 2):  # a retried run that appends
                    docs.append({"_index": INDEX, "_id": f"{task_id}-retry{copy}", "_source": doc})
        lost = next(d for d in docs if d["_id"].startswith(f"task-{FAULT_DAY + 3:02d}"))
        lost["_source"] = {
            **lost["_source"],
            "review_tier": "second_tier"
            if lost["_source"]["review_tier"] == "first_tier"
            else "first_tier",
        }
        await async_bulk(client, docs, refresh=True)
    finally:
        await client.close()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)


def _dsn(db: str) -> str:
    return PG.rsplit("/", 1)[0] + "/" + db


async def run_demo() -> int:
    """Load the stack, reconcile fourteen days, drill into the first drifted day."""
    from driftgauge.stores import open_adapter
    from driftgauge.stores.preflight import preflight

    print(f"driftgauge demo: PostgreSQL {PG.rsplit('@', 1)[-1]}, OpenSearch {OS_URL}")
    rows = _tasks()
    await _load_source(rows)
    await _sync_index(rows)
    print(f"loaded {len(rows)} tasks over {DAYS} days; fault switched on from day {FAULT_DAY}")
    text = CONFIG.format(pg=_dsn(DB), os=OS_URL, state=_dsn(DB), index=INDEX, days=DAYS)
    cfg_path = Path(".local/demo.yml")
    await asyncio.to_thread(_write, cfg_path, text)
    check = load_text(text).checks["reviews"]
    source, reader = await open_adapter(check.source), await open_adapter(check.reader)
    try:
        await preflight(check, source, reader)  # as every run does: fields readable first
        start = datetime(START.year, START.month, START.day, tzinfo=UTC)
        bar = ProgressBar(sys.stderr, "reviews")
        result = await reconcile(
            check,
            source,
            reader,
            start,
            start + timedelta(days=DAYS),
            now=datetime.now(UTC),
            progress=bar.update,
        )
        bar.close()
        print()
        print(render_run(result))
        drifted = [b for b in result.buckets if b.status == "drift"]
        if drifted:
            day = drifted[0].start.date()
            report = await drill_live(check, source, reader, day)
            print()
            print(render_drill(report))
            hour = next((n.label for n in report.nodes if n.differs), None)
            if hour is not None:
                print()
                print(render_drill(await drill_live(check, source, reader, day, hour)))
    finally:
        await source.close()
        await reader.close()
    print(
        f"\nconfig written to {cfg_path}; serve it with:\n"
        f"  .venv/bin/driftgauge serve --config {cfg_path} --port 8080\n"
        "then: http://127.0.0.1:8080/metrics and "
        "http://127.0.0.1:8080/api/v1/checks/reviews/days"
    )
    return 0 if result.status == "drift" else 1


def main() -> None:
    """Run the demo and exit with its status."""
    raise SystemExit(asyncio.run(run_demo()))


if __name__ == "__main__":
    main()
