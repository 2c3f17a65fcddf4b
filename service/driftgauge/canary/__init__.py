"""Canaries: a sentinel written with the sync job's identity, read back through the reader view."""

from driftgauge.canary.keys import adapter_key_picker, sql_key_picker
from driftgauge.canary.metrics import CanaryMetrics
from driftgauge.canary.probe import CanaryResult, KeyPicker, run_canary
from driftgauge.canary.service import CanaryService, canary_trigger, key_picker_for
from driftgauge.canary.store import CanaryStore

__all__ = [
    "CanaryMetrics",
    "CanaryResult",
    "CanaryService",
    "CanaryStore",
    "KeyPicker",
    "adapter_key_picker",
    "canary_trigger",
    "key_picker_for",
    "run_canary",
    "sql_key_picker",
]
