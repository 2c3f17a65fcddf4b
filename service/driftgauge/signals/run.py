"""Compute and record a check's vocabulary and volume verdicts for one window."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from driftgauge.config.frozen import Check
from driftgauge.signals.store import SignalsStore
from driftgauge.signals.vocabulary import VocabularyResult, measure_vocabulary
from driftgauge.signals.volume import VolumeDay, measure_volume
from driftgauge.stores.base import StoreAdapter, VocabularyCounter


@dataclass
class SignalsResult:
    """What one evaluation found."""

    vocabulary: list[VocabularyResult] = field(default_factory=list)
    volume: list[VolumeDay] = field(default_factory=list)


async def evaluate_signals(
    check: Check,
    source: StoreAdapter,
    store: SignalsStore,
    window_start: datetime,
    window_end: datetime,
    *,
    now: datetime,
) -> SignalsResult:
    """Measure the check's vocabulary and volume over the window and record both.

    Raises StoreError when the source fails; nothing is recorded then, so the metrics keep
    the previous verdict.
    """
    out = SignalsResult()
    if check.vocabulary:
        if not isinstance(source, VocabularyCounter):
            raise ValueError(f"check {check.name!r}: its source cannot count values")
        out.vocabulary = await measure_vocabulary(check, source, window_start, window_end)
    if check.volume is not None:
        out.volume = await measure_volume(check, source, window_start, window_end, now)
    if out.vocabulary:
        await store.record_vocabulary(out.vocabulary, now)
    if check.volume is not None:
        await store.record_volume(check.name, out.volume, now)
    return out
