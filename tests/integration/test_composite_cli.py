"""A composite-key check from PostgreSQL to OpenSearch, through the config and the CLI."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.test_cli import cli
from tests.store_fixtures import OS_URL, PG_OS_STORES, load_index, pg_table, scratch_stores

pytestmark = pytest.mark.integration

BASE = datetime(2026, 4, 1, tzinfo=UTC)
CONFIG = (
    PG_OS_STORES
    + """\
  runs:
    source: {{store: pg, table: results, key: [conversation_id, run_id, task_id], time: ts}}
    reader:
      store: os
      index: {index}
      key: [conversation_id, run_id, task_id]
      time: ts
      fields: {{conversation_id: conversation}}
    key_type: [string, integer, integer]
    fields: {{label: string}}
    settle: 0s
    drilldown: {{leaf_rows: 20}}
"""
)
ROWS = [
    (f"c{c}", r, t, "ok", BASE + timedelta(minutes=60 * c + 9 * r + t))
    for c in range(4)
    for r in range(5)
    for t in range(3)
]


@pytest.fixture
async def config(tmp_path: Path) -> AsyncIterator[Path]:
    """Write a config over a source table and a reader index with planted drift."""
    source: list[tuple[str, int | None, int, str, datetime]] = [*ROWS]
    source.append(("c9", 9, 9, "ok", BASE + timedelta(hours=9)))  # missing
    source.append(("c8", None, 1, "ok", BASE + timedelta(hours=8)))  # excluded: null_key
    reader = [(c, r, t, "z" if (c, r, t) == ("c2", 2, 2) else v, w) for c, r, t, v, w in ROWS]
    reader += [("c11", 2, 3, "ok", BASE + timedelta(hours=5))]  # extra
    reader += [("c3", 1, 1, "ok", BASE + timedelta(minutes=190))]  # a second copy
    async with scratch_stores("dg_composite", utf8=True) as stores:
        await pg_table(
            stores.dsn,
            "results",
            "conversation_id text, run_id bigint, task_id bigint, label text, ts timestamptz",
            source,
        )
        await load_index(
            stores.client,
            stores.index,
            {
                "conversation": "keyword",
                "run_id": "long",
                "task_id": "long",
                "label": "keyword",
                "ts": "date",
            },
            (
                {"conversation": c, "run_id": r, "task_id": t, "label": v, "ts": w.isoformat()}
                for c, r, t, v, w in reader
            ),
            shards=2,
        )
        path = tmp_path / "dg.yml"
        path.write_text(CONFIG.format(dsn=stores.dsn, os=OS_URL, index=stores.index))
        yield path


def test_check_finds_planted_drift_and_shows_composite_keys_as_arrays(config: Path) -> None:
    window = ["--config", str(config), "--since", "2026-04-01", "--until", "2026-04-02"]
    # Not the difference digests (auto): OpenSearch's cells disagree with encoding.iblt's
    # over the same rows (one-column keys too), which the engine reports as an error.
    window += ["--first-pass", "days"]
    done = cli("check", "runs", *window, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    day, *rest = json.loads(done.stdout)["buckets"]
    assert [b["status"] for b in rest] == ["ok"] * len(rest)
    assert (day["missing"], day["extra"], day["mismatched"], day["duplicates"]) == (1, 1, 2, 1)
    assert day["excluded"] == {"null_key": 1}
    assert {(s["kind"], tuple(s["key"])) for s in day["samples"]} == {
        ("missing", ("c9", 9, 9)),
        ("extra", ("c11", 2, 3)),
        ("mismatched", ("c2", 2, 2)),
        ("mismatched", ("c3", 1, 1)),
    }
    text = cli("check", "runs", *window[:-1], "slots")
    assert 'missing    ["c9",9,9]' in text.stdout, text.stdout


def test_drill_lists_composite_keys_as_arrays(config: Path) -> None:
    hours = json.loads(cli("drill", "runs", "2026-04-01", "--config", str(config), "--json").stdout)
    differing = [n["label"] for n in hours["nodes"] if n["differs"]]
    keys = []
    for hour in differing:
        done = cli("drill", "runs", "2026-04-01", "--hour", hour, "--config", str(config), "--json")
        assert done.returncode in (0, 1), done.stderr
        keys += [(k["kind"], k["key"]) for k in json.loads(done.stdout)["keys"]]
    assert ("missing", ["c9", 9, 9]) in keys and ("extra", ["c11", 2, 3]) in keys
