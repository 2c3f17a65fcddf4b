"""How many differing keys a stored bucket's key list stands for, when it is a sample."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from driftgauge.engine.payloads import DriftKind
from driftgauge.engine.result import BucketResult
from driftgauge.state.codec import StoredKey

KINDS: tuple[DriftKind, ...] = ("missing", "extra", "mismatched")


@dataclass(frozen=True)
class KeyFilter:
    """Which of a bucket's stored keys a read asks for: a kind, a key-hash prefix, [start, end)."""

    kind: DriftKind | None = None
    prefix: str | None = None
    start: datetime | None = None
    end: datetime | None = None

    @property
    def narrows(self) -> bool:
        """Return True when a prefix or a time bound applies (a sample's total is then unknown)."""
        return self.prefix is not None or self.start is not None or self.end is not None


EVERY_KEY = KeyFilter()
"""The filter of a read that asks for keys of every kind, anywhere in the bucket."""


@dataclass(frozen=True)
class KeysPage:
    """One page of a bucket's stored keys, with the total the filters match."""

    total: int | None
    """Differing keys matching the filters over every page; None when only a sample is kept."""
    sampled: bool
    """The stored keys of the kinds asked for are fewer than the bucket found."""
    keys: list[StoredKey]


def found(bucket: BucketResult, kind: DriftKind) -> int:
    """Return how many keys of `kind` the run found in the bucket (its stored counts)."""
    counts = {"missing": bucket.missing, "extra": bucket.extra, "mismatched": bucket.mismatched}
    return counts[kind]


def key_total(
    bucket: BucketResult,
    kind: DriftKind | None,
    kept: Mapping[str, int],
    matched: int,
    *,
    filtered: bool,
) -> tuple[int | None, bool]:
    """Return (total, sampled) for keys of `kind` (None: every kind) of a stored bucket.

    `kept` is the stored keys per kind, `matched` the stored keys the filters match and
    `filtered` whether a prefix or hour filter applies. A list that kept every key counts
    itself; a sample counts the bucket's keys unless filtered, when the total is unknown
    (the keys left out of the sample carry no hash or time to filter them by).
    """
    kinds = KINDS if kind is None else (kind,)
    sampled = any(kept.get(k, 0) < found(bucket, k) for k in kinds)
    if not sampled:
        return matched, False
    if filtered:
        return None, True
    return sum(found(bucket, k) for k in kinds), True
