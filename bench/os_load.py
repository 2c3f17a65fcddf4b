"""Load the scale bench's tasks into an OpenSearch index fast, and plant or revert its drift.

Bulk loading is tuned for one-off bench indexes, not for a serving cluster: no refresh
and no replica while loading, an asynchronous translog, documents with generated ids
(append-only: no version lookup per document), times as epoch milliseconds, bodies of
`batch` documents generated in this process while `streams` bodies are in flight. One
refresh and a force merge at the end. Drift is planted by task id (delete by query, then
index the changed and extra documents), so the loader needs no document ids.

    .venv/bin/python bench/os_load.py --rows 10000000 --index dgbench-scale-10000000
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address

OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
BASE_MS = 1_767_225_600_000
"""2026-01-01T00:00:00Z in epoch milliseconds: task 1's completion time."""
_ACTION = '{"index":{}}\n'


def os_call(method: str, path: str, body: Any = None, timeout: float = 3600) -> Any:
    """Make one OpenSearch call and return its JSON (404 on HEAD is an answer, not an error)."""
    r = urllib3.request(
        method,
        f"{OS_URL}{path}",
        body=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
        timeout=timeout,
    )
    if r.status >= 300 and not (method == "HEAD" and r.status == 404):
        raise RuntimeError(f"{method} {path}: {r.status} {r.data[:500]!r}")
    return json.loads(r.data) if r.data else r.status


def source(task_id: int, label: str, at_ms: int) -> str:
    """Return one bulk index action and its document."""
    return f'{_ACTION}{{"task_id":{task_id},"label":"{label}","completed_at":{at_ms}}}\n'


def clean_bodies(n: int, spacing_ms: int, batch: int) -> Iterator[str]:
    """Yield the bulk bodies of tasks 1..n, `batch` documents each."""
    labels = [f"label_{r}" for r in range(7)]
    for lo in range(1, n + 1, batch):
        hi = min(lo + batch, n + 1)
        yield "".join(
            f'{_ACTION}{{"task_id":{i},"label":"{labels[i % 7]}",'
            f'"completed_at":{BASE_MS + (i - 1) * spacing_ms}}}\n'
            for i in range(lo, hi)
        )


class Streams:
    """Send bulk bodies to one index over `streams` connections, one body in flight on each."""

    def __init__(self, index: str, streams: int = 2) -> None:
        self.url = f"{OS_URL}/{index}/_bulk"
        self.http = urllib3.PoolManager(maxsize=streams)
        self.todo: queue.Queue[str | None] = queue.Queue(maxsize=streams)
        self.errors: list[BaseException] = []
        self.docs = 0
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(streams)]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        while (body := self.todo.get()) is not None:
            try:
                self._send(body)
            except BaseException as exc:  # reported by close()
                self.errors.append(exc)

    def _send(self, body: str) -> None:
        r = self.http.request(
            "POST",
            self.url,
            body=body.encode(),
            headers={"Content-Type": "application/x-ndjson"},
            timeout=1800,
        )
        got = json.loads(r.data)
        if r.status != 200 or got.get("errors"):
            raise RuntimeError(f"bulk failed ({r.status}): {r.data[:500]!r}")
        self.docs += len(got["items"])

    def send_all(self, bodies: Iterable[str]) -> None:
        """Queue every body (blocks while every stream is busy), stopping at the first error."""
        for body in bodies:
            if self.errors:
                break
            self.todo.put(body)

    def close(self) -> int:
        """Wait for every queued body; return the documents indexed, or raise the first error."""
        for _ in self.threads:
            self.todo.put(None)
        for t in self.threads:
            t.join()
        if self.errors:
            raise self.errors[0]
        return self.docs


def create(index: str, shards: int) -> None:
    """Create the index, tuned for loading (no refresh, no replica, async translog)."""
    os_call(
        "PUT",
        f"/{index}",
        {
            "settings": {
                "number_of_shards": shards,
                "number_of_replicas": 0,
                "refresh_interval": "-1",
                "translog.durability": "async",
                "translog.sync_interval": "30s",
                "translog.flush_threshold_size": "1gb",
            },
            "mappings": {
                "properties": {
                    "task_id": {"type": "long"},
                    "label": {"type": "keyword"},
                    "completed_at": {"type": "date"},
                }
            },
        },
    )


def load(
    index: str, n: int, spacing_ms: int, *, shards: int = 2, streams: int = 2, batch: int = 20_000
) -> dict[str, float]:
    """Load tasks 1..n into a new index; return the seconds of each phase and docs/s."""
    t0 = time.perf_counter()
    create(index, shards)
    out = Streams(index, streams)
    out.send_all(clean_bodies(n, spacing_ms, batch))
    sent = out.close()
    t1 = time.perf_counter()
    os_call("PUT", f"/{index}/_settings", {"index": {"refresh_interval": "1s"}})
    os_call("POST", f"/{index}/_refresh")
    t2 = time.perf_counter()
    os_call("POST", f"/{index}/_forcemerge?max_num_segments=1")
    t3 = time.perf_counter()
    count = os_call("GET", f"/{index}/_count")["count"]
    if sent != n or count != n:
        raise SystemExit(f"{index} holds {count} documents ({sent} acknowledged), loaded {n}")
    return {
        "bulk_s": round(t1 - t0, 1),
        "refresh_s": round(t2 - t1, 1),
        "forcemerge_s": round(t3 - t2, 1),
        "docs_per_s": round(n / (t1 - t0)),
    }


def delete_ids(index: str, ids: list[int]) -> int:
    """Delete every document of these task ids; return how many went."""
    gone = 0
    for lo in range(0, len(ids), 20_000):
        part = ids[lo : lo + 20_000]
        got = os_call(
            "POST",
            f"/{index}/_delete_by_query?refresh=true&conflicts=proceed",
            {"query": {"terms": {"task_id": part}}},
        )
        gone += int(got["deleted"])
    return gone


def index_docs(index: str, docs: Iterable[tuple[int, str, int]], batch: int = 20_000) -> int:
    """Index (task id, label, epoch ms) documents; return how many were acknowledged."""
    out = Streams(index, 2)
    buf: list[str] = []
    for d in docs:
        buf.append(source(*d))
        if len(buf) >= batch:
            out.send_all(["".join(buf)])
            buf = []
    if buf:
        out.send_all(["".join(buf)])
    sent = out.close()
    os_call("POST", f"/{index}/_refresh")
    return int(sent)


def main() -> None:
    """Load one clean index of n tasks (the scale bench's spacing) and print the timings."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--batch", type=int, default=20_000)
    args = ap.parse_args()
    spacing = 40 * 86_400_000 // args.rows
    load1 = os.getloadavg()[0]
    got = load(
        args.index, args.rows, spacing, shards=args.shards, streams=args.streams, batch=args.batch
    )
    print(json.dumps({"rows": args.rows, "index": args.index, "load": load1, **got}))


if __name__ == "__main__":
    main()
