"""A check's row hash: lookup3 where both sides' kinds compute it, md5 otherwise or when told."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from driftgauge.cli.render import render_run
from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.errors import ConfigError
from driftgauge.engine.result import RunResult
from driftgauge.repair import partitions

from .config_text import config_head

T = datetime(2026, 1, 1, tzinfo=UTC)

CONFIG = (
    config_head(pg="postgres", pg2="postgres", my="mariadb")
    + """
  c:
    source: {store: pg, table: t, key: id, time: ts}
    reader: {store: READER, table: t, key: id, time: ts}
    fields: {label: string}
    SETTING
"""
)


def load(reader: str, setting: str = "") -> Check:
    text = CONFIG.replace("READER", reader).replace("SETTING", setting)
    return load_text(text).checks["c"]


def test_auto_picks_lookup3_when_both_kinds_compute_it() -> None:
    check = load("pg2")
    assert (check.row_hash, check.source.row_hash, check.reader.row_hash) == ("lookup3",) * 3


def test_auto_falls_back_to_md5_when_a_side_cannot() -> None:
    check = load("my")
    assert (check.row_hash, check.source.row_hash, check.reader.row_hash) == ("md5",) * 3


def test_config_can_force_md5() -> None:
    check = load("pg2", "row_hash: md5")
    assert (check.row_hash, check.source.row_hash, check.reader.row_hash) == ("md5",) * 3


def test_forcing_lookup3_on_a_side_that_cannot_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as err:
        load("my", "row_hash: lookup3")
    assert (
        "checks.c.row_hash: a mariadb store (checks.c.reader) cannot compute lookup3; use md5 "
        "or auto (kinds that can: elasticsearch, opensearch, postgres)"
    ) in err.value.problems


def test_snapshots_of_two_row_hashes_never_compare_digests() -> None:
    md5 = partitions.snapshot(Aggregate(3, 3, 111))
    assert "row_hash" not in md5  # stored md5 snapshots keep their old form
    fast = partitions.snapshot(Aggregate(3, 3, 222), "lookup3")
    assert fast["row_hash"] == "lookup3"
    assert partitions.same(md5, fast)  # count and keys agree; the digests are not comparable
    assert not partitions.same(md5, partitions.snapshot(Aggregate(4, 4, 111), "lookup3"))
    assert not partitions.same(fast, partitions.snapshot(Aggregate(3, 3, 111), "lookup3"))


def test_a_run_names_its_row_hash() -> None:
    check = load("pg2")
    result = RunResult(check.name, T, T, started_at=T, row_hash=check.row_hash)
    assert result.to_dict()["row_hash"] == "lookup3"
    assert render_run(result).endswith("row hash lookup3")
