"""The pure-Python lookup3 row hash against vectors PostgreSQL itself computed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from driftgauge.encoding import digest as d
from driftgauge.encoding.lookup3 import hash_bytes_extended

GOLDEN = Path(__file__).parents[1] / "golden"
VECTORS: list[dict[str, Any]] = json.loads(
    (GOLDEN / "digest_vectors.json").read_text(encoding="utf-8")
)["vectors"]
LOOKUP3: dict[str, Any] = json.loads((GOLDEN / "row_hash_vectors.json").read_text(encoding="utf-8"))


def test_every_digest_vector_has_a_lookup3_hash() -> None:
    # A new vector needs its lookup3 hash too: SELECT hashtextextended(encoding, 0) in PostgreSQL.
    assert sorted(LOOKUP3["lookup3"]) == sorted(v["name"] for v in VECTORS)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_lookup3_row_hash_matches_postgresql(vector: dict[str, Any]) -> None:
    want = int(LOOKUP3["lookup3"][vector["name"]])
    assert d.row_hash(vector["encoding"], "lookup3") == want
    assert d.row_hash(vector["encoding"], "md5") == int(vector["row_hash"])


@pytest.mark.parametrize(("text", "want"), LOOKUP3["lookup3_texts"], ids=lambda x: repr(x)[:20])
def test_lookup3_of_every_tail_length_matches_postgresql(text: str, want: str) -> None:
    assert hash_bytes_extended(text.encode("utf-8")) == int(want)


def test_lookup3_digest_of_all_vectors_wraps_mod_2_64() -> None:
    hashes = [d.row_hash(v["encoding"], "lookup3") for v in VECTORS]
    assert sum(hashes) >= 2**64
    pairs = [(v["key_hash"], h) for v, h in zip(VECTORS, hashes, strict=True)]
    assert d.aggregate(pairs).digest == int(LOOKUP3["lookup3_all_digest"])


def test_hash_row_keeps_the_md5_key_hash_under_lookup3() -> None:
    md5 = d.hash_row("k", "string", ["v"], ["string"])
    fast = d.hash_row("k", "string", ["v"], ["string"], algorithm="lookup3")
    assert fast[0] == md5[0]
    assert fast[1] == hash_bytes_extended(b"S1:kS1:v") != md5[1]


def test_seed_perturbs_the_state_as_postgresql_does() -> None:
    # SELECT hashtextextended('abc', 1) on PostgreSQL 15 (x86_64): 2125675926272891485.
    assert hash_bytes_extended(b"abc", 1) == 2125675926272891485


def test_unknown_row_hash_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown row hash 'crc'"):
        d.row_hash("S0:", "crc")  # type: ignore[arg-type]
