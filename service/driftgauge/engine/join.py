"""Join the rows of one leaf from both sides and classify every differing key."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

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


def deltas(
    source: Iterable[RowHash], reader: Iterable[RowHash], group: Callable[[RowHash], Hashable]
) -> dict[Hashable, Delta]:
    """Return source minus reader over all the rows, split by group of the row."""
    out: dict[Hashable, Delta] = {}
    for sign, rows in ((1, source), (-1, reader)):
        for r in rows:
            out.setdefault(group(r), Delta()).row(r, sign)
    return out


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
