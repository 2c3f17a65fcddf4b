"""Join the rows of one leaf from both sides and classify every differing key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from driftgauge.engine.result import DriftKind, KeyDiff
from driftgauge.stores.base import RowHash


@dataclass
class LeafDiff:
    """What a leaf join found: counts by kind, ledger exclusions and the differing keys."""

    missing: int = 0
    extra: int = 0
    mismatched: int = 0
    duplicates: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    keys: list[KeyDiff] = field(default_factory=list)

    def add(self, other: LeafDiff) -> None:
        """Fold another leaf's findings into this one."""
        self.missing += other.missing
        self.extra += other.extra
        self.mismatched += other.mismatched
        self.duplicates += other.duplicates
        for reason, n in other.excluded.items():
            self.excluded[reason] = self.excluded.get(reason, 0) + n
        self.keys.extend(other.keys)


def _group(rows: Iterable[RowHash]) -> dict[str, list[RowHash]]:
    out: dict[str, list[RowHash]] = {}
    for row in rows:
        out.setdefault(row.key, []).append(row)
    return out


def join_rows(source: Iterable[RowHash], reader: Iterable[RowHash],
              ledger_excluded: Mapping[str, str] | None = None) -> LeafDiff:
    """Classify keys as missing, extra or mismatched (different content or several copies).

    A key the source has and the reader lacks counts as excluded, not missing, when the
    sync job reported it (no_match or skipped) with a reason.
    """
    src = _group(source)
    rdr = _group(reader)
    excused = ledger_excluded or {}
    diff = LeafDiff()
    for key in src.keys() | rdr.keys():
        s_rows = src.get(key, [])
        r_rows = rdr.get(key, [])
        kind: DriftKind
        if not r_rows:
            reason = excused.get(key)
            if reason is not None and len(s_rows) == 1:
                diff.excluded[reason] = diff.excluded.get(reason, 0) + 1
                continue
            kind = "missing"
        elif not s_rows:
            kind = "extra"
        else:
            same = (len(s_rows) == 1 and len(r_rows) == 1
                    and s_rows[0].row_hash == r_rows[0].row_hash)
            if same:
                continue
            kind = "mismatched"
        if len(s_rows) > 1 or len(r_rows) > 1:
            diff.duplicates += 1
        setattr(diff, kind, getattr(diff, kind) + 1)
        when = (s_rows or r_rows)[0].event_time
        diff.keys.append(KeyDiff(key, kind, len(s_rows), len(r_rows), when))
    return diff
