"""A check's measures: fields it sums exactly, refused where a side cannot sum them."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from decimal import Decimal

import pytest

from driftgauge.config.frozen import Tolerance
from driftgauge.configfile.loader import load_text
from driftgauge.core.aggregate import Aggregate, measures_differ
from driftgauge.engine.result import BucketResult
from driftgauge.engine.verdict import judge
from driftgauge.stores import registry

from .config_text import config_head, config_problems

CONFIG = (
    config_head(pg="postgres", os="opensearch", my="mariadb")
    + """
  c:
    source: {store: pg, table: t, key: id, time: ts, fields: {amount: amount_src}}
    reader: {store: READER, index: i, table: t, key: id, time: ts}
    fields: {amount: decimal}
    measures: [amount]
    SCALE
"""
)


def text_for(reader: str, scale: str = "") -> str:
    """Return the config of check `c` read from store `reader`, its view fit for that kind."""
    text = CONFIG.replace("READER", reader).replace("SCALE", scale)
    if reader == "os":
        return text.replace("index: i, table: t, ", "index: i, ")
    return text.replace("index: i, ", "")


def load(reader: str, scale: str = "") -> object:
    return load_text(text_for(reader, scale))


def test_measures_map_to_each_sides_column() -> None:
    config = load("os", "measure_scale: 2")
    check = config.checks["c"]  # type: ignore[attr-defined]
    assert check.measures == ("amount",)
    assert check.source.measure_columns == ("amount_src",)
    assert check.reader.measure_columns == ("amount",)
    assert check.reader.measure_scale == 2


def test_opensearch_needs_a_scale() -> None:
    problems = config_problems(text_for("os"))
    assert any(
        p.startswith("checks.c.measure_scale: required with measures on an opensearch")
        for p in problems
    ), problems


def test_a_kind_that_cannot_sum_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    mariadb = registry.kind_of("mariadb")
    monkeypatch.setitem(registry.kinds(), "mariadb", replace(mariadb, capabilities=frozenset()))
    problems = config_problems(text_for("my"))
    assert any(
        p.startswith("checks.c.measures: a mariadb store cannot sum measures") for p in problems
    ), problems


def test_a_differing_total_is_drift_whatever_the_tolerance() -> None:
    src = Aggregate(3, 3, 7, {"amount": Decimal("10.00")})
    rdr = Aggregate(3, 3, 9, {"amount": Decimal("10.01")})
    assert measures_differ(src, rdr) == ["amount"]
    assert not src.same_as(rdr)
    assert measures_differ(src, Aggregate(3, 3, 7)) == []
    bucket = BucketResult(
        start=datetime(2026, 3, 14),
        status="ok",
        expected=3,
        visible=3,
        mismatched=1,
        source=src,
        reader=rdr,
    )
    judge(bucket, Tolerance(mismatched=5))
    assert bucket.status == "drift"
    assert bucket.reasons == ["measure[amount] total 10.00 in the source, 10.01 in the reader"]
