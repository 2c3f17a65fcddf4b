"""The Python reference of the canonical encoding against the golden vectors and the spec."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from driftgauge.core.aggregate import Aggregate
from driftgauge.encoding import digest as d

GOLDEN = json.loads(
    (Path(__file__).parents[1] / "golden" / "digest_vectors.json").read_text(encoding="utf-8")
)
VECTORS: list[dict[str, Any]] = GOLDEN["vectors"]


def _encode(v: dict[str, Any]) -> str:
    return d.row_encoding(
        v["key"],
        v["key_type"],
        [f["value"] for f in v["fields"]],
        [f["type"] for f in v["fields"]],
        v.get("precision", "us"),
    )


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_golden_vector(vector: dict[str, Any]) -> None:
    encoding = _encode(vector)
    assert encoding == vector["encoding"]
    assert d.key_encoding(vector["key"], vector["key_type"]) == vector["key_encoding"]
    assert d.key_hash(vector["key_encoding"]) == vector["key_hash"]
    assert d.row_hash(encoding) == int(vector["row_hash"])


def test_golden_digest_of_all_vectors_wraps_mod_2_64() -> None:
    pairs = [(v["key_hash"], int(v["row_hash"])) for v in VECTORS]
    assert sum(h for _, h in pairs) >= 2**64  # the vectors exercise the wrap
    agg = d.aggregate(pairs)
    assert agg == Aggregate(
        count=GOLDEN["all"]["count"],
        distinct_keys=GOLDEN["all"]["distinct_keys"],
        digest=int(GOLDEN["all"]["digest"]),
    )


def test_key_hash_is_lowercase_md5_hex_and_row_hash_is_unsigned_64_bit() -> None:
    assert d.key_hash("") == "d41d8cd98f00b204e9800998ecf8427e"
    assert d.row_hash("") == 0xD41D8CD98F00B204
    assert all(0 <= int(v["row_hash"]) < 2**64 for v in VECTORS)


def test_sum_not_xor_a_duplicate_row_changes_the_digest() -> None:
    row = (d.key_hash("S1:k"), d.row_hash("S1:kS1:v"))
    once, twice = d.aggregate([row]), d.aggregate([row, row])
    assert twice.digest == (2 * row[1]) % 2**64
    assert twice.digest != 0  # XOR would cancel the two copies to 0
    assert (twice.count, twice.distinct_keys) == (2, 1)
    assert not twice.same_as(once)


def test_a_missing_and_an_extra_row_do_not_cancel() -> None:
    a = (d.key_hash("S1:a"), d.row_hash("S1:aS1:x"))
    b = (d.key_hash("S1:b"), d.row_hash("S1:bS1:x"))
    c = (d.key_hash("S1:c"), d.row_hash("S1:cS1:x"))
    left, right = d.aggregate([a, b]), d.aggregate([a, c])
    assert left.count == right.count
    assert left.digest != right.digest


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("a|b", ["c"]), ("a", ["b|c"])),
        (("k", [None, ""]), ("k", ["", None])),
        (("k", ["N"]), ("k", [None])),
        (("k", ["ab", "c"]), ("k", ["a", "bc"])),
        (("k", ["S1:x"]), ("k", ["S", "x"])),
    ],
)
def test_ambiguous_rows_encode_differently(
    left: tuple[str, list[str | None]], right: tuple[str, list[str | None]]
) -> None:
    enc = [d.row_encoding(k, "string", vals, ["string"] * len(vals)) for k, vals in (left, right)]
    assert enc[0] != enc[1]
    assert d.row_hash(enc[0]) != d.row_hash(enc[1])


def test_string_and_integer_keys_differ() -> None:
    assert d.key_encoding("7", "string") == "S1:7"
    assert d.key_encoding(7, "integer") == "I7;"
    assert d.key_text(7) == d.key_text("7") == "7"
    assert d.key_text(None) == ""


def test_string_length_counts_code_points_not_utf16_units_or_bytes() -> None:
    assert d.encode_value("😀", "string") == "S1:😀"
    assert d.encode_value("é", "string") == "S1:é"
    assert d.encode_value("e\u0301", "string") == "S2:e\u0301"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("0", "0"),
        ("-0.0", "0"),
        (Decimal("-0.000"), "0"),
        ("1.50", "1.5"),
        ("1e-7", "0.0000001"),
        ("100", "100"),
        ("1E+2", "100"),
        ("-12.340", "-12.34"),
        (0.1, "0.1"),
        (-0.0, "0"),
        (1e-7, "0.0000001"),
        (1e22, "10000000000000000000000"),
        (42, "42"),
        ("12345678901234567890.123456789000", "12345678901234567890.123456789"),
        ("NaN", "NaN"),
        ("-Infinity", "-Infinity"),
        (float("inf"), "Infinity"),
    ],
)
def test_decimal_is_plain_without_trailing_zeros(value: Any, text: str) -> None:
    assert d.plain_decimal(value) == text
    assert d.encode_value(value, "decimal") == f"D{text};"


def test_timestamps_are_utc_epoch_microseconds() -> None:
    aware = datetime(2024, 3, 10, 1, 59, 59, 500000, tzinfo=timezone(timedelta(hours=-5)))
    assert d.epoch_micros(aware) == d.epoch_micros("2024-03-10T06:59:59.5Z")
    assert d.epoch_micros(datetime(2024, 1, 1)) == 1_704_067_200_000_000  # naive reads as UTC
    assert d.epoch_micros(date(2024, 1, 1)) == 1_704_067_200_000_000
    assert d.epoch_micros("1969-12-31T23:59:59.999999Z") == -1
    assert d.from_epoch_micros(-1) == datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def test_booleans_integers_and_nulls() -> None:
    assert [d.encode_value(v, "boolean") for v in (True, False, None)] == ["T", "F", "N"]
    assert d.encode_value(2**63 - 1, "integer") == "I9223372036854775807;"
    assert d.encode_value(-(2**63), "integer") == "I-9223372036854775808;"
    assert d.encode_value(None, "timestamp") == "N"


@pytest.mark.parametrize(
    ("value", "type_", "error"),
    [
        (2**63, "integer", ValueError),
        (True, "integer", TypeError),
        (1, "boolean", TypeError),
        ("x1", "decimal", ValueError),
        (Decimal("1.5"), "integer", ValueError),
        (b"raw", "string", TypeError),
        ("yesterday", "timestamp", ValueError),
    ],
)
def test_values_of_the_wrong_type_are_refused(
    value: Any, type_: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        d.encode_value(value, type_)


def test_row_encoding_needs_one_value_per_field() -> None:
    with pytest.raises(ValueError, match="2 values for 1 fields"):
        d.row_encoding("k", "string", ["a", "b"], ["string"])
