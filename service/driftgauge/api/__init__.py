"""The REST API and /metrics, served by FastAPI."""

from driftgauge.api.app import create_app
from driftgauge.api.runtime import Runtime

__all__ = ["Runtime", "create_app"]
