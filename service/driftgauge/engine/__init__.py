"""The reconciliation engine: pure, it talks to stores only through the adapter Protocol."""

from driftgauge.engine.reconcile import compare_hours, compare_prefixes, reconcile
from driftgauge.engine.result import BucketResult, KeyDiff, Node, RunResult

__all__ = [
    "BucketResult",
    "KeyDiff",
    "Node",
    "RunResult",
    "compare_hours",
    "compare_prefixes",
    "reconcile",
]
