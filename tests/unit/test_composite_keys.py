"""Composite keys: the tuple encoding's golden vectors, the config, and the engine on them."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from driftgauge.cli.report import run_report
from driftgauge.configfile.loader import load_file, load_text
from driftgauge.core.errors import ConfigError
from driftgauge.core.fields import NULL_KEY, KeyType
from driftgauge.encoding import digest as d
from driftgauge.engine.result import KeyDiff
from driftgauge.jobs.runner import canonical_keys, key_hasher
from driftgauge.state.codec import StoredKey
from driftgauge.stores import registry
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import MemoryAdapter
from tests.unit.engine_helpers import BASE, between

from .config_text import config_head

GOLDEN = json.loads(
    (Path(__file__).parents[1] / "golden" / "tuple_vectors.json").read_text(encoding="utf-8")
)
VECTORS: list[dict[str, Any]] = GOLDEN["vectors"]
EXCLUDED: list[dict[str, Any]] = GOLDEN["excluded"]


def _key(vector: dict[str, Any]) -> tuple[str | int | None, ...]:
    return tuple(vector["key"])


def _fields(vector: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    return [f["value"] for f in vector["fields"]], [f["type"] for f in vector["fields"]]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_tuple_golden_vector(vector: dict[str, Any]) -> None:
    types = tuple(vector["key_types"])
    values, field_types = _fields(vector)
    assert d.key_encoding(_key(vector), types) == vector["key_encoding"]
    assert d.row_encoding(_key(vector), types, values, field_types) == vector["encoding"]
    assert d.hash_row(_key(vector), types, values, field_types) == (
        vector["key_hash"],
        int(vector["row_hash"]),
    )
    assert d.key_text(_key(vector)) == vector["key_text"]
    assert d.composite_key_text(vector["key_encoding"]) == vector["key_text"]
    assert d.parse_tuple_encoding(vector["key_encoding"]) == _key(vector)
    assert d.key_from_text(vector["key_text"], types) == _key(vector)


def test_tuples_cut_differently_encode_differently() -> None:
    ab_c = d.key_encoding(("ab", "c"), ("string", "string"))
    a_bc = d.key_encoding(("a", "bc"), ("string", "string"))
    assert ab_c != a_bc
    # Nor does a tuple ever encode like a one-column key: no single token starts with K.
    assert d.key_encoding("abc", "string")[0] != ab_c[0] == "K"
    assert len({v["key_hash"] for v in VECTORS}) == len(VECTORS)


@pytest.mark.parametrize("vector", EXCLUDED, ids=[v["name"] for v in EXCLUDED])
def test_a_null_part_is_an_exclusion_never_a_key(vector: dict[str, Any]) -> None:
    assert vector["excluded"] == NULL_KEY
    assert d.has_null_part(_key(vector))
    # A reader's row may still hold one; it is encoded (and then extra), never expected.
    types = tuple(vector["key_types"])
    assert d.key_encoding(_key(vector), types) == vector["reader_key_encoding"]
    assert d.parse_tuple_encoding(vector["reader_key_encoding"]) == _key(vector)


def test_a_one_column_key_keeps_its_encoding() -> None:
    assert not d.has_null_part("x") and not d.has_null_part(None)
    assert d.key_encoding("k1", "string") == "S2:k1"
    assert d.key_text(7) == "7"
    assert d.shown_key("7", composite=False) == "7"
    assert d.shown_key('["a",7]', composite=True) == ["a", 7]


@pytest.mark.parametrize(
    "text",
    ["S1:a", "K2:S1:a", "K2:S1:aI1;x", "K1X", "K2:S1:aD1;", "K:S1:a"],
)
def test_malformed_tuple_encodings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        d.parse_tuple_encoding(text)


def test_a_tuple_needs_two_parts_and_a_type_each() -> None:
    with pytest.raises(ValueError, match="at least two parts"):
        d.tuple_encoding(["a"], ["string"])
    with pytest.raises(ValueError, match="2 key parts for 3 key types"):
        d.tuple_encoding(["a", "b"], ["string", "string", "string"])
    with pytest.raises(TypeError, match="tuple of parts"):
        d.key_encoding(("a", "b"), "string")
    with pytest.raises(ValueError, match="JSON array of 2"):
        d.key_from_text('["a"]', ("string", "integer"))
    with pytest.raises(TypeError, match="not of type integer"):
        d.key_from_text('["a", true]', ("string", "integer"))


CONFIG = (
    config_head(src="postgres", dst="postgres")
    + """
  runs:
    source: {store: src, table: tasks, key: SOURCE_KEY, time: ts}
    reader:
      store: dst
      table: tasks_copy
      key: READER_KEY
      time: ts
      fields: {conversation_id: conv, label: label_text}
    key_type: KEY_TYPE
    fields: {label: string}
    tolerance: {exclusion_rate: {null_key: 0.5}}
    drilldown: {leaf_rows: 50}
    EXTRA
"""
)
PARTS = "[conversation_id, run_id, task_id]"


def _config(
    source: str = PARTS,
    reader: str = PARTS,
    key_type: str = "[string, integer, integer]",
    extra: str = "",
) -> str:
    return (
        CONFIG.replace("SOURCE_KEY", source)
        .replace("READER_KEY", reader)
        .replace("KEY_TYPE", key_type)
        .replace("EXTRA", extra)
    )


def _one_column(text: str) -> str:
    return text.replace("tolerance: {exclusion_rate: {null_key: 0.5}}", "").replace(
        "conversation_id: conv, ", ""
    )


def test_composite_key_parts_take_each_sides_columns_through_fields() -> None:
    check = load_text(_config()).checks["runs"]
    src, rdr = check.source, check.reader
    assert src.composite and rdr.composite
    assert src.key_columns == ("conversation_id", "run_id", "task_id")
    assert rdr.key_columns == ("conv", "run_id", "task_id")
    assert src.key_types == rdr.key_types == ("string", "integer", "integer")
    assert check.key_types == ("string", "integer", "integer")
    assert rdr.columns == ("label_text",)
    # The source drops rows with a NULL part under null_key, first; the reader keeps them.
    assert [ex.reason for ex in src.exclusions] == [NULL_KEY]
    assert src.exclusions[0].null_columns == src.key_columns
    assert rdr.exclusions == ()
    assert dict(check.tolerance.exclusion_rate) == {NULL_KEY: 0.5}


def test_one_key_type_applies_to_every_part_and_a_one_part_list_is_one_column() -> None:
    check = load_text(_config(key_type="string")).checks["runs"]
    assert check.source.key_types == ("string",) * 3
    text = _one_column(_config(source="[id]", reader="id", key_type="integer"))
    single = load_text(text).checks["runs"]
    assert not single.source.composite
    assert (single.source.key_column, single.reader.key_column) == ("id", "id")
    assert single.source.key_types == ("integer",) and single.key_types == ()
    assert single.source.exclusions == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"reader": "[conversation_id, run_id]"},
            "checks.runs.reader.key: 2 part(s), the source's key has 3",
        ),
        (
            {"reader": "[conv, run_id, task_id]"},
            "checks.runs.reader.key[0]: 'conv' is not the source's key part 'conversation_id'",
        ),
        (
            {"source": "[conversation_id, run_id, run_id]"},
            "checks.runs.source.key[2]: key part 'run_id' is listed twice",
        ),
        ({"key_type": "[string, integer]"}, "checks.runs.key_type: 2 types for a key of 3 parts"),
        (
            {"extra": "exclusions: [{reason: null_key, where: 'x IS NULL'}]"},
            "checks.runs.exclusions[0].reason: 'null_key' is the reason of the rows",
        ),
        ({"key_type": "[string, float, integer]"}, "checks.runs.key_type"),
        ({"source": "[]"}, "checks.runs.source.key"),
    ],
)
def test_composite_key_config_errors_name_the_field(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_text(_config(**kwargs))
    assert message in str(err.value)


def test_a_fields_entry_naming_neither_a_field_nor_a_key_part_is_refused() -> None:
    text = _config().replace("{conversation_id: conv,", "{conversation: conv,")
    with pytest.raises(ConfigError) as err:
        load_text(text)
    assert "checks.runs.reader.fields.conversation: not one of the check's fields or key parts" in (
        str(err.value)
    )


def test_one_column_key_with_several_types_is_refused() -> None:
    text = _one_column(_config(source="id", reader="id", key_type="[string, integer]"))
    with pytest.raises(ConfigError) as err:
        load_text(text)
    assert "checks.runs.key_type: 2 types for a one-column key" in str(err.value)


def test_null_key_tolerance_needs_a_composite_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_text(_config(source="id", reader="id").replace("conversation_id: conv, ", ""))
    assert "checks.runs.tolerance.exclusion_rate.null_key: no exclusion has this reason" in str(
        err.value
    )


def test_a_kind_without_composite_keys_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    postgres = registry.kind_of("postgres")
    lacking = replace(postgres, capabilities=postgres.capabilities - {registry.COMPOSITE_KEYS})
    monkeypatch.setitem(registry.kinds(), "postgres", lacking)
    with pytest.raises(ConfigError) as err:
        load_text(_config())
    assert "checks.runs.source.key: a postgres store cannot compare a composite key" in str(
        err.value
    )


# ---- the engine, on the in-memory fake -------------------------------------------------

TYPES: tuple[KeyType, ...] = ("string", "integer", "integer")


def _row(parts: tuple[str | int | None, ...], label: str, minute: int) -> RowHash:
    khash, rhash = d.hash_row(parts, TYPES, [label], ["string"])
    return RowHash(d.key_text(parts), khash, rhash, BASE + timedelta(minutes=minute))


async def test_planted_differences_under_a_composite_key_are_found_exactly() -> None:
    check = load_text(_config()).checks["runs"]
    common = [(("c1", r, t), "ok") for r in range(3) for t in range(4)]
    # ("c1", 1, 23) and ("c11", 2, 3) would collide under a separator-free join.
    source = [*common, (("c1", 1, 23), "ok"), (("c1", 9, 9), "new"), (("c", 11, 1), "dup")]
    reader = [
        *[(k, "changed" if k == ("c1", 2, 2) else v) for k, v in common],
        (("c11", 2, 3), "ok"),
        (("c", 11, 1), "dup"),
        (("c", 11, 1), "dup"),
        (("c5", None, 1), "ok"),  # a reader row with a NULL part is no expected key: extra
    ]
    src = MemoryAdapter([_row(k, v, i) for i, (k, v) in enumerate(source)])
    rdr = MemoryAdapter([_row(k, v, i) for i, (k, v) in enumerate(reader)])
    result = await between(check, src, rdr)
    (day,) = result.buckets
    assert (day.missing, day.extra, day.mismatched, day.duplicates) == (2, 2, 2, 1)
    found = {(k.kind, k.key) for k in day.samples}
    assert found == {
        ("missing", '["c1",1,23]'),
        ("missing", '["c1",9,9]'),
        ("extra", '["c11",2,3]'),
        ("extra", '["c5",null,1]'),
        ("mismatched", '["c1",2,2]'),
        ("mismatched", '["c",11,1]'),
    }
    samples = run_report(result, composite=True)["buckets"][0]["samples"]
    assert sorted(s["key"] for s in samples if s["kind"] == "extra") == [
        ["c11", 2, 3],
        ["c5", None, 1],
    ]
    hashed = key_hasher(check)
    assert {hashed(k.key) for k in day.samples if k.key} == {k.key_hash for k in day.samples}
    assert hashed('["c1", "x", 1]') is None


def test_the_composite_example_config_is_valid() -> None:
    example = Path(__file__).parents[2] / "deploy" / "examples" / "composite.yml"
    check = load_file(example).checks["task_results"]
    assert check.reader.key_columns == ("conversation", "run_id", "task_id")
    assert check.reader.columns == ("outcome", "score")
    assert check.source.exclusions[0].reason == NULL_KEY
    search = load_file(example).checks["task_search"]
    assert search.reader.kind == "opensearch" and search.reader.composite


def test_ledger_keys_of_a_composite_key_are_read_in_canonical_form() -> None:
    check = load_text(_config()).checks["runs"]
    excused = {'["c1", 7, 12]': "no_match", '["c1","x",1]': "skipped", "c1": "no_match"}
    assert canonical_keys(check, excused) == {'["c1",7,12]': "no_match"}
    text = _one_column(_config(source="id", reader="id", key_type="string"))
    single = load_text(text).checks["runs"]
    assert canonical_keys(single, excused) is excused


def test_stored_and_live_keys_show_a_composite_key_as_its_parts() -> None:
    diff = KeyDiff('["c1",null,3]', "extra", 0, 1, BASE, "ab")
    assert diff.payload(composite=True).key == ["c1", None, 3]
    assert diff.payload().key == '["c1",null,3]'
    stored = StoredKey(diff, "ab").payload(composite=True)
    assert (stored.key, stored.key_hash) == (["c1", None, 3], "ab")
