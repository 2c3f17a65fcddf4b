"""Join the rows of one leaf from both sides and classify every differing key."""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import IO

from driftgauge.core.aggregate import Aggregate
from driftgauge.engine.payloads import DriftKind
from driftgauge.engine.result import KeyDiff
from driftgauge.stores.base import RowHash

MOD = 1 << 64


@dataclass
class Delta:
    """Source minus reader: a row count and a digest (mod 2^64)."""

    count: int = 0
    digest: int = 0

    @classmethod
    def between(cls, source: Aggregate, reader: Aggregate) -> Delta:
        """Return how two aggregates differ."""
        return cls(source.count - reader.count, (source.digest - reader.digest) % MOD)

    def add(self, other: Delta) -> None:
        """Add another difference to this one."""
        self.count += other.count
        self.digest = (self.digest + other.digest) % MOD

    def row(self, row: RowHash, sign: int) -> None:
        """Count one row of the source (sign 1) or of the reader (sign -1)."""
        self.count += sign
        self.digest = (self.digest + sign * row.row_hash) % MOD


@dataclass
class LeafDiff:
    """What a leaf join found: counts by kind, ledger exclusions and the differing keys.

    `found` sums the rows of every key the join set apart (differing or excused): it is
    what the found differences say the two sides differ by, to be checked against what
    the stores' aggregates say (see engine.explain).
    """

    missing: int = 0
    extra: int = 0
    mismatched: int = 0
    duplicates: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    keys: list[KeyDiff] = field(default_factory=list)
    found: Delta = field(default_factory=Delta)
    groups: dict[Hashable, Delta] = field(default_factory=dict)
    """`found` split by the join's grouping (a prefix, an hour), when one was asked."""
    unexplained: list[str] = field(default_factory=list)
    """Nodes whose aggregates the found differences do not account for."""
    source_copies: int = 0
    """Source rows beyond the first of each key (a day's count minus its distinct keys)."""
    reader_copies: int = 0

    def add(self, other: LeafDiff) -> None:
        """Fold another leaf's findings into this one (groups stay with their join)."""
        self.missing += other.missing
        self.extra += other.extra
        self.mismatched += other.mismatched
        self.duplicates += other.duplicates
        for reason, n in other.excluded.items():
            self.excluded[reason] = self.excluded.get(reason, 0) + n
        self.keys.extend(other.keys)
        self.found.add(other.found)
        self.unexplained.extend(other.unexplained)
        self.source_copies += other.source_copies
        self.reader_copies += other.reader_copies


def _group(rows: Iterable[RowHash]) -> dict[str, list[RowHash]]:
    # By key hash, the key's typed canonical identity: a NULL key and "" are two keys.
    out: dict[str, list[RowHash]] = {}
    for row in rows:
        out.setdefault(row.key_hash, []).append(row)
    return out


def join_rows(
    source: Iterable[RowHash],
    reader: Iterable[RowHash],
    ledger_excluded: Mapping[str, str] | None = None,
    group: Callable[[RowHash], Hashable] | None = None,
) -> LeafDiff:
    """Classify keys as missing, extra or mismatched (different content or several copies).

    A key the source has and the reader lacks counts as excluded, not missing, when the
    sync job reported it (no_match or skipped) with a reason. The rows of every key set
    apart are summed into `found` (and, with `group`, into `groups` by group of the row).
    """
    src = _group(source)
    rdr = _group(reader)
    excused = ledger_excluded or {}
    diff = LeafDiff()

    def account(s_rows: list[RowHash], r_rows: list[RowHash]) -> None:
        for sign, rows in ((1, s_rows), (-1, r_rows)):
            for r in rows:
                diff.found.row(r, sign)
                if group is not None:
                    diff.groups.setdefault(group(r), Delta()).row(r, sign)

    for key_hash in src.keys() | rdr.keys():
        s_rows = src.get(key_hash, [])
        r_rows = rdr.get(key_hash, [])
        key = (s_rows or r_rows)[0].key
        diff.source_copies += max(len(s_rows) - 1, 0)
        diff.reader_copies += max(len(r_rows) - 1, 0)
        kind: DriftKind
        if not r_rows:
            reason = None if key is None else excused.get(key)
            if reason is not None and len(s_rows) == 1:
                diff.excluded[reason] = diff.excluded.get(reason, 0) + 1
                account(s_rows, r_rows)  # excused, yet in the source's digest
                continue
            kind = "missing"
        elif not s_rows:
            kind = "extra"
        else:
            same = (
                len(s_rows) == 1 and len(r_rows) == 1 and s_rows[0].row_hash == r_rows[0].row_hash
            )
            if same:
                continue
            kind = "mismatched"
        if len(s_rows) > 1 or len(r_rows) > 1:
            diff.duplicates += 1
        account(s_rows, r_rows)
        setattr(diff, kind, getattr(diff, kind) + 1)
        when = (s_rows or r_rows)[0].event_time
        diff.keys.append(KeyDiff(key, kind, len(s_rows), len(r_rows), when, key_hash))
    return diff


PART_ROWS = 16_384
"""Rows of a side one partition aims at: about what a partitioned join holds at once."""
HOLD_ROWS = 8_192
"""Rows buffered across partitions before they are written to the spill file."""


def partitions_for(rows: int) -> int:
    """Return how many partitions (a power of two) keep each near PART_ROWS rows a side."""
    parts = 1
    while parts * PART_ROWS < rows and parts < 1 << 16:
        parts *= 2
    return parts


_Spilled = tuple[str | None, str, int, datetime, Mapping[str, Decimal] | None]


class Partitioned:
    """Both sides' rows split by key hash into partitions, spilled to a temporary file.

    Every copy of a key lands in one partition (its key hash picks it), so a join
    partition by partition finds what one join of all the rows finds, while holding
    one partition's rows at a time instead of the whole day's.
    """

    def __init__(self, parts: int) -> None:
        self.parts = parts
        self.rows = [0, 0]
        """Rows added, source then reader."""
        self._buf: dict[tuple[int, int], list[_Spilled]] = {}
        self._held = 0
        self._file: IO[bytes] | None = None
        self._chunks: dict[tuple[int, int], list[tuple[int, int]]] = {}
        """(side, partition) -> (offset, length) of each batch written to the file."""

    def part_of(self, key_hash: str) -> int:
        """Return the partition of a key hash (its leading 32 bits, scaled)."""
        return int(key_hash[:8], 16) * self.parts >> 32

    def add(self, row: RowHash, sign: int) -> None:
        """Add one row of the source (sign 1) or of the reader (sign -1)."""
        side = 0 if sign == 1 else 1
        self.rows[side] += 1
        at = (side, self.part_of(row.key_hash))
        self._buf.setdefault(at, []).append(
            (row.key, row.key_hash, row.row_hash, row.event_time, row.measures)
        )
        self._held += 1
        if self._held >= HOLD_ROWS and self.parts > 1:
            self._flush()

    def _flush(self) -> None:
        if self._file is None:
            # Lives until close() (the join is a context manager), not one block.
            self._file = tempfile.TemporaryFile(prefix="driftgauge-join-")  # noqa: SIM115
        f = self._file
        f.seek(0, 2)
        for at, batch in self._buf.items():
            data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
            self._chunks.setdefault(at, []).append((f.tell(), len(data)))
            f.write(data)
        self._buf.clear()
        self._held = 0

    def _side(self, side: int, part: int) -> list[RowHash]:
        out: list[RowHash] = []
        f = self._file
        for offset, length in self._chunks.get((side, part), []):
            assert f is not None
            f.seek(offset)
            out.extend(RowHash(*r) for r in pickle.loads(f.read(length)))
        out.extend(RowHash(*r) for r in self._buf.get((side, part), []))
        return out

    def each(self) -> Iterator[tuple[list[RowHash], list[RowHash]]]:
        """Yield each partition's (source rows, reader rows), one partition at a time."""
        for part in range(self.parts):
            yield self._side(0, part), self._side(1, part)

    def __enter__(self) -> Partitioned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the spilled rows."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._buf.clear()
        self._chunks.clear()


def join_partitioned(
    rows: Partitioned, ledger_excluded: Mapping[str, str] | None = None
) -> LeafDiff:
    """Join the rows partition by partition (see join_rows): only the differences stay."""
    diff = LeafDiff()
    for s_rows, r_rows in rows.each():
        diff.add(join_rows(s_rows, r_rows, ledger_excluded))
    return diff
