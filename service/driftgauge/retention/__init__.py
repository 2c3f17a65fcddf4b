"""Retention: delete stored results past their age that nothing served still reads."""

from driftgauge.retention.job import RetentionJob
from driftgauge.retention.prune import TABLES, PruneReport, prune

__all__ = ["TABLES", "PruneReport", "RetentionJob", "prune"]
