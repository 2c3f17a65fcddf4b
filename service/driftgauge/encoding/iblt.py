"""Difference digests: a per-day invertible table of row hashes, subtracted and peeled.

Each side adds every expected row of a day to K cells, one in each of K disjoint
sub-tables of `width` cells, chosen from bits of its row hash. A cell holds the row
count and the sums (mod 2^64) of row hashes, check hashes and event times in epoch
microseconds. Sums, never XOR, so two copies of a row add up rather than cancel.

Subtracting the reader's table from the source's leaves only the rows that differ.
A cell left with one row (count +-1 and a check hash that matches its row hash) names
that row: its row hash, side and event time; taking it out of its other cells frees
more. A peel that does not end with every cell at zero is a failure, never a guess.

The row hash already covers the key (the row encoding starts with the key's), so the
row hash identifies a row: a mismatched key is two rows that differ, one per side.

The same cells and check hash are computed by SQL in the stores (see docs/digest.md);
every constant and bit position here is part of that contract.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MOD = 1 << 64
MASK32 = (1 << 32) - 1
K = 3
"""Cells per row, one in each disjoint sub-table, so a row's cells are distinct."""
POSITION_BITS = 21
"""Row-hash bits per sub-table position: sub-table j reads bits 21j .. 21j+20."""
POSITION_MASK = (1 << POSITION_BITS) - 1
MIN_WIDTH = 16
MAX_WIDTH = 4096
"""Cells per sub-table of a whole window's pass, and of any table a store does not widen.

Every day of the window pays for the width chosen (16,384 cells cost 1.6x the 4,096 at
10M rows over 40 days on PostgreSQL), so one dense day must not widen them all."""
DAY_WIDTH = 1 << 16
"""Cells per sub-table a store that sums cells inside its database builds for one day
scanned again (encoding.sizing.retry_width): 5 s both sides for 250k rows at 16,384."""
DEFAULT_WIDTH = 32
"""Cells per sub-table when no earlier run says how much a day drifts."""
PER_ROW = 0.7
"""Sub-table cells per differing row: small tables need slack above the 1.23 of the limit."""
SLACK = 8
# The check hash's multipliers: each below 2^31, so a 32-bit half times one fits in a
# signed 64-bit integer and no store overflows computing it.
C1, C2, C3, C4 = 1911520717, 1403217233, 2028178513, 1500450271

Cell = tuple[int, int, int, int]
"""(row count, sum of row hashes, sum of check hashes, sum of event times), sums mod 2^64."""
Table = Mapping[int, Cell]
"""Cells by index (sub-table j holds indexes j*width .. (j+1)*width-1); absent is zero."""


def check_hash(row_hash: int) -> int:
    """Return the check hash of an unsigned 64-bit row hash (non-negative, below 2^63).

    Multiplications of 32-bit halves joined by XOR: not additive, so the sum of several
    rows' check hashes matches the check hash of their summed row hashes only by chance.
    """
    u = row_hash % MOD
    p = ((u & MASK32) * C1) ^ ((u >> 32) * C2)
    q = p ^ (p >> 29)
    return ((q & MASK32) * C3) ^ ((q >> 32) * C4)


def positions(row_hash: int, width: int) -> tuple[int, ...]:
    """Return the K cell indexes of a row hash, one per sub-table of `width` cells."""
    u = row_hash % MOD
    return tuple(j * width + ((u >> (POSITION_BITS * j)) & POSITION_MASK) % width for j in range(K))


def width_for(rows: int, widest: int = MAX_WIDTH) -> int:
    """Return the sub-table width for a day expected to differ by `rows` rows (capped)."""
    want = math.ceil(rows * PER_ROW) + SLACK
    return max(MIN_WIDTH, min(widest, want))


def widest(adapter: object) -> int:
    """Return the widest sub-table an adapter builds for one day (see DAY_WIDTH)."""
    width = getattr(adapter, "widest_digest", MAX_WIDTH)
    return width if isinstance(width, int) else MAX_WIDTH


def build(rows: Iterable[tuple[int, int]], width: int) -> dict[int, Cell]:
    """Return the table of (row hash, event time in epoch microseconds) pairs."""
    table: dict[int, list[int]] = {}
    for rhash, micros in rows:
        check = check_hash(rhash)
        for i in positions(rhash, width):
            c = table.setdefault(i, [0, 0, 0, 0])
            c[0] += 1
            c[1] = (c[1] + rhash) % MOD
            c[2] = (c[2] + check) % MOD
            c[3] = (c[3] + micros) % MOD
    return {i: (c[0], c[1], c[2], c[3]) for i, c in table.items()}


def subtract(source: Table, reader: Table) -> dict[int, Cell]:
    """Return source minus reader, cell by cell; cells that cancel are left out."""
    out: dict[int, Cell] = {}
    zero = (0, 0, 0, 0)
    for i, s in source.items():
        r = reader.get(i, zero)
        cell = (s[0] - r[0], (s[1] - r[1]) % MOD, (s[2] - r[2]) % MOD, (s[3] - r[3]) % MOD)
        if cell != zero:
            out[i] = cell
    for i, r in reader.items():
        if i not in source:
            cell = (-r[0], -r[1] % MOD, -r[2] % MOD, -r[3] % MOD)
            if cell != zero:
                out[i] = cell
    return out


@dataclass(frozen=True, slots=True)
class Entry:
    """One row a difference digest named: on the source (sign 1) or the reader (-1)."""

    row_hash: int
    micros: int
    """Its event time in epoch microseconds (signed)."""
    sign: int


def peel(diff: Table, width: int) -> list[Entry] | None:
    """Return every row the subtracted table holds, or None when it does not peel to zero.

    None also when a row would come out that its own cells cannot hold (an index out of
    the table, a cell that is not its own): the table is not what both sides built.
    """
    cells = {i: list(c) for i, c in diff.items()}
    if any(not 0 <= i < K * width for i in cells):
        return None
    found: list[Entry] = []
    limit = 2 * K * width
    todo = list(cells)
    # A cell holds one row when its count is +-1 and its check-hash sum is that row's
    # check hash. Tested inline, not by a call: a dense day peels tens of thousands of
    # rows (28% faster on 16,700).
    while todo:
        i = todo.pop()
        cell = cells.get(i)
        if cell is None:
            continue
        sign = cell[0]
        if sign != 1 and sign != -1:
            continue
        rhash = (sign * cell[1]) % MOD
        check = check_hash(rhash)
        if check != (sign * cell[2]) % MOD:
            continue
        micros = (sign * cell[3]) % MOD
        entry = Entry(rhash, micros - MOD if micros >= 1 << 63 else micros, sign)
        where = positions(rhash, width)
        if i not in where:
            return None
        found.append(entry)
        for j in where:
            c = cells.get(j)
            if c is None:
                c = cells[j] = [0, 0, 0, 0]
            c[0] -= sign
            c[1] = (c[1] - sign * rhash) % MOD
            c[2] = (c[2] - sign * check) % MOD
            c[3] = (c[3] - sign * entry.micros) % MOD
            if not (c[0] or c[1] or c[2] or c[3]):
                del cells[j]
            else:
                todo.append(j)
        if len(found) > limit:
            return None  # more rows than cells can hold: not a table both sides built
    return found if not cells else None
