"""The reader schema preflight refuses fields rows would silently drop out of, on real stores."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError
from driftgauge.jobs.adapters import AdapterPool
from driftgauge.jobs.runner import run_check
from driftgauge.state.store import StateStore
from driftgauge.stores.preflight import verify_all
from tests.store_fixtures import (
    OS_URL,
    PG_OS_STORES,
    bulk_load,
    create_index,
    pg_table,
    scratch_stores,
)

pytestmark = pytest.mark.integration

BASE = datetime(2026, 4, 1, tzinfo=UTC)
ROWS = 300
LONG_EVERY = 3
"""Every third key is 30 characters long: past an `ignore_above: 20`."""

CONFIG = (
    PG_OS_STORES
    + """\
  c:
    source: {{store: pg, table: reviews, key: review_id, time: done_at, fields: {source_fields}}}
    reader: {{store: os, index: {index}, key: {key}, time: {time}, fields: {reader_fields}}}
    fields: {fields}
    settle: 0s
{extra}"""
)

MAPPING: dict[str, Any] = {
    "review_id": {"type": "keyword"},
    "done_at": {"type": "date"},
    "review_tier": {"type": "keyword"},
    "updated_at": {"type": "date"},
}


def _key(i: int, *, long: bool) -> str:
    return f"review-{i:04d}-" + "x" * 18 if long else f"r{i:04d}"


def _rows(all_long: bool) -> list[tuple[str, str, datetime, datetime]]:
    """Return (key, tier, done_at, updated_at); updated_at has microseconds."""
    return [
        (
            _key(i, long=all_long or i % LONG_EVERY == 0),
            "ab"[i % 2],
            BASE + timedelta(minutes=4 * i),
            BASE + timedelta(seconds=i, microseconds=123_456),
        )
        for i in range(ROWS)
    ]


class Stores:
    """A PG source table and a factory of reader indexes over the same rows."""

    def __init__(self, dsn: str, client: AsyncOpenSearch, tmp: Path) -> None:
        self.dsn = dsn
        self.client = client
        self.tmp = tmp
        self.indexes: list[str] = []

    async def index(
        self, mapping: dict[str, Any], *, all_long: bool = False, docs: bool = True
    ) -> str:
        """Create an index with `mapping` holding the rows (unless `docs` is False)."""
        name = f"dg_preflight_{uuid.uuid4().hex[:10]}"
        self.indexes.append(name)
        await create_index(self.client, name, mapping, shards=1, replicas=0)
        if docs:
            await bulk_load(
                self.client,
                name,
                (
                    {
                        "review_id": k,
                        "review_tier": tier,
                        "done_at": done.isoformat(),
                        "updated_at": upd.isoformat(),
                    }
                    for k, tier, done, upd in _rows(all_long)
                ),
            )
        return name

    def config(
        self,
        index: str,
        *,
        key: str = "review_id",
        time: str = "done_at",
        label: str = "review_tier",
        source_label: str = "tier",
        fields: str = "{label: string}",
        extra: str = "",
    ) -> str:
        """Return the config text of check `c` over the table and `index`."""
        reader_fields = "{label: " + label
        source_fields = "{label: " + source_label
        if "updated" in fields:
            reader_fields += ", updated: updated_at"
            source_fields += ", updated: updated_at"
        return CONFIG.format(
            dsn=self.dsn,
            os=OS_URL,
            index=index,
            key=key,
            time=time,
            fields=fields,
            reader_fields=reader_fields + "}",
            source_fields=source_fields + "}",
            extra=extra,
        )

    def write(self, text: str) -> Path:
        """Write a config file and return its path."""
        path = self.tmp / f"dg_{uuid.uuid4().hex[:6]}.yml"
        path.write_text(text)
        return path


@pytest.fixture(scope="module")
async def stores(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stores]:
    """Yield the source table (long keys every third row) and an index factory."""
    async with scratch_stores("dg_preflight") as scratch:
        out = Stores(scratch.dsn, scratch.client, tmp_path_factory.mktemp("preflight"))
        columns = "review_id text, tier text, done_at timestamptz, updated_at timestamptz"
        await pg_table(scratch.dsn, "reviews", columns, _rows(False))
        await pg_table(scratch.dsn, "reviews_long", columns, _rows(True))
        try:
            yield out
        finally:
            for index in out.indexes:
                await scratch.client.indices.delete(index=index, ignore_unavailable=True)


def cli(config: Path, *args: str, store: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `driftgauge check c` the way a user would, by default without the state database."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "driftgauge.cli",
            "check",
            "c",
            "--config",
            str(config),
            "--since",
            "2026-04-01",
            "--until",
            "2026-04-01",
            "--json",
            *([] if store else ["--no-store"]),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def validate(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `driftgauge config validate` on a config file."""
    return subprocess.run(
        [sys.executable, "-m", "driftgauge.cli", "config", "validate", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    """Assert the CLI exited 2 with every word in its error, and no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr)
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


Case = Callable[[Stores], Awaitable[str]]


async def _ignore_above_key(s: Stores) -> str:
    return s.config(await s.index(MAPPING | {"review_id": {"type": "keyword", "ignore_above": 20}}))


async def _missing_content(s: Stores) -> str:
    return s.config(await s.index(MAPPING), label="review_tierx")


async def _missing_time(s: Stores) -> str:
    return s.config(await s.index(MAPPING), time="done_atx")


async def _no_doc_values(s: Stores) -> str:
    return s.config(
        await s.index(MAPPING | {"review_tier": {"type": "keyword", "doc_values": False}})
    )


async def _text_field(s: Stores) -> str:
    return s.config(await s.index(MAPPING | {"review_tier": {"type": "text"}}))


CASES: dict[str, tuple[Case, tuple[str, ...]]] = {
    "ignore_above key": (
        _ignore_above_key,
        ("checks.c.reader.key", "review_id", "ignore_above 20"),
    ),
    "missing content field": (
        _missing_content,
        ("checks.c.reader.fields.label", "review_tierx", "not mapped"),
    ),
    "missing time field": (_missing_time, ("checks.c.reader.time", "done_atx", "not mapped")),
    "doc_values false": (
        _no_doc_values,
        ("checks.c.reader.fields.label", "review_tier", "doc_values"),
    ),
    "text field": (_text_field, ("checks.c.reader.fields.label", "review_tier", "text")),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_check_refuses_a_field_rows_would_drop_out_of(stores: Stores, case: str) -> None:
    make, words = CASES[case]
    refused(cli(stores.write(await make(stores))), *words)


async def test_all_keys_too_long_is_refused_naming_the_key(stores: Stores) -> None:
    index = await stores.index(
        MAPPING | {"review_id": {"type": "keyword", "ignore_above": 20}}, all_long=True
    )
    text = stores.config(index).replace("table: reviews,", "table: reviews_long,")
    done = cli(stores.write(text))
    refused(done, "checks.c.reader.key", "ignore_above 20")
    assert "sort value" not in done.stderr


async def test_every_concrete_index_behind_an_alias_is_checked(stores: Stores) -> None:
    good = await stores.index(MAPPING, docs=False)
    bad = await stores.index(MAPPING | {"review_id": {"type": "keyword", "ignore_above": 20}})
    alias = f"{good}_all"
    await stores.client.indices.put_alias(index=f"{good},{bad}", name=alias)
    refused(cli(stores.write(stores.config(alias))), "checks.c.reader.key", bad, "ignore_above 20")


async def test_an_empty_index_that_has_not_mapped_a_field_yet_is_fine(stores: Stores) -> None:
    full = await stores.index(MAPPING)
    fresh = await stores.index({"review_id": {"type": "keyword"}}, docs=False)
    alias = f"{full}_rolled"
    await stores.client.indices.put_alias(index=f"{full},{fresh}", name=alias)
    done = cli(stores.write(stores.config(alias)))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr)


async def test_a_missing_source_column_is_named(stores: Stores) -> None:
    text = stores.config(await stores.index(MAPPING), source_label="tierx")
    refused(cli(stores.write(text)), "checks.c.source.fields.label", "tierx")


async def test_the_adapter_pool_refuses_before_counting(stores: Stores) -> None:
    config = load_text(await _missing_time(stores))
    pool = AdapterPool(config.checks)
    try:
        with pytest.raises(ConfigError, match=r"checks\.c\.reader\.time: .*done_atx"):
            await pool.get("c")
    finally:
        await pool.close()


async def test_a_refused_field_fails_the_recorded_run_with_its_reason(stores: Stores) -> None:
    config = load_text(await _ignore_above_key(stores))
    state = await StateStore.open(config.state)
    pool = AdapterPool(config.checks)
    try:
        result = await run_check(
            config.checks["c"],
            pool.getter("c"),
            state,
            BASE,
            BASE + timedelta(days=1),
            trigger="test",
            now=BASE,
        )
        stored = await state.latest_finished_run("c")
    finally:
        await pool.close()
        await state.close()
    assert result.status == "error" and result.buckets == []
    assert stored is not None and stored.status == "error" and not stored.complete
    assert stored.error is not None
    assert "checks.c.reader.key" in stored.error and "ignore_above 20" in stored.error


async def test_the_stored_cli_run_exits_2_naming_the_field(stores: Stores) -> None:
    refused(
        cli(stores.write(await _missing_content(stores)), store=True),
        "checks.c.reader.fields.label",
        "review_tierx",
    )


async def test_verify_all_lists_every_check_in_one_call(stores: Stores) -> None:
    good = stores.config(await stores.index(MAPPING))
    bad = (await _missing_time(stores)).split("checks:\n", 1)[1].replace("  c:", "  d:", 1)
    problems = await verify_all(load_text(good + bad))
    assert len(problems) == 1 and problems[0].startswith("checks.d.reader.time: ")


async def test_config_validate_connect_names_the_field(stores: Stores) -> None:
    path = stores.write(await _missing_time(stores))
    offline = validate(path)
    assert offline.returncode == 0, offline.stdout + offline.stderr
    done = validate(path, "--connect")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stdout.startswith("checks.c.reader.time: field done_atx is not mapped")


async def test_microsecond_and_millisecond_timestamps_compare_as_time(stores: Stores) -> None:
    index = await stores.index(MAPPING)
    both = "{label: string, updated: timestamp}"
    done = cli(stores.write(stores.config(index, fields=both)))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr)
    (bucket,) = json.loads(done.stdout)["buckets"]
    assert (bucket["expected"], bucket["visible"], bucket["mismatched"]) == (ROWS, ROWS, 0)


async def test_a_precision_finer_than_a_side_holds_is_refused(stores: Stores) -> None:
    index = await stores.index(MAPPING)
    text = stores.config(
        index, fields="{label: string, updated: timestamp}", extra="    timestamp_precision: us\n"
    )
    refused(cli(stores.write(text)), "checks.c.reader.fields.updated", "updated_at", "milliseconds")
