"""PostgreSQL's 64-bit byte hash (hash_bytes_extended, Bob Jenkins' lookup3), in pure Python.

`hashtextextended(text, 0)` is this hash of the text's bytes (UTF-8 here: the adapter
refuses other server encodings) under a deterministic collation, on a little-endian
server. PostgreSQL keeps it stable across releases because hash partitioning stores its
values; it is not the same on a big-endian server, which the PostgreSQL preflight
detects by hashing a known string. See docs/digest.md.
"""

from __future__ import annotations

MASK32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B9
PG_OFFSET = 3923095
"""PostgreSQL adds this to the initial state on top of lookup3's golden ratio and length."""


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & MASK32


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    # lookup3's mix is six rounds of one step, the roles of a, b and c turning each round
    # (a from c then c += b; b from a then a += c; c from b then b += a): two full turns.
    for k in (4, 6, 8, 16, 19, 4):
        a = ((a - c) & MASK32) ^ _rot(c, k)
        c = (c + b) & MASK32
        a, b, c = b, c, a
    return a, b, c


def _final(a: int, b: int, c: int) -> tuple[int, int, int]:
    c = ((c ^ b) - _rot(b, 14)) & MASK32
    a = ((a ^ c) - _rot(c, 11)) & MASK32
    b = ((b ^ a) - _rot(a, 25)) & MASK32
    c = ((c ^ b) - _rot(b, 16)) & MASK32
    a = ((a ^ c) - _rot(c, 4)) & MASK32
    b = ((b ^ a) - _rot(a, 14)) & MASK32
    c = ((c ^ b) - _rot(b, 24)) & MASK32
    return a, b, c


def hash_bytes_extended(data: bytes, seed: int = 0) -> int:
    """Return PostgreSQL's hash_bytes_extended(data, seed) as an unsigned 64-bit integer."""
    n = len(data)
    a = b = c = (GOLDEN + n + PG_OFFSET) & MASK32
    if seed:
        # The seed is hashed as if it were a 12-byte chunk: high word, low word, zeros.
        a = (a + (seed >> 32 & MASK32)) & MASK32
        b = (b + (seed & MASK32)) & MASK32
        a, b, c = _mix(a, b, c)
    i = 0
    # Little-endian words; the tail's missing bytes are zeros, and the lowest byte of c
    # is left for the length (already in the initial state), so c's tail shifts by 8.
    while n - i > 11:
        a = (a + int.from_bytes(data[i : i + 4], "little")) & MASK32
        b = (b + int.from_bytes(data[i + 4 : i + 8], "little")) & MASK32
        c = (c + int.from_bytes(data[i + 8 : i + 12], "little")) & MASK32
        a, b, c = _mix(a, b, c)
        i += 12
    a = (a + int.from_bytes(data[i : i + 4], "little")) & MASK32
    b = (b + int.from_bytes(data[i + 4 : i + 8], "little")) & MASK32
    c = (c + (int.from_bytes(data[i + 8 : i + 11], "little") << 8)) & MASK32
    a, b, c = _final(a, b, c)
    return b << 32 | c
