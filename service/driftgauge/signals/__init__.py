"""Source-side signals: vocabulary the reader cannot match, and volume outside its band."""

from driftgauge.signals.metrics import SignalsMetrics
from driftgauge.signals.run import evaluate_signals
from driftgauge.signals.store import SignalsStore
from driftgauge.signals.vocabulary import VocabularyResult, measure_vocabulary, unmatched
from driftgauge.signals.volume import VolumeDay, judge_days, measure_volume

__all__ = [
    "SignalsMetrics",
    "SignalsStore",
    "VocabularyResult",
    "VolumeDay",
    "evaluate_signals",
    "judge_days",
    "measure_vocabulary",
    "measure_volume",
    "unmatched",
]
