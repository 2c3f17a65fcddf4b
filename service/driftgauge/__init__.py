"""driftgauge: reconcile derived data against its source of truth."""

__version__ = "0.1.0"
