"""The REST API and /metrics, served by FastAPI."""

from driftgauge.api.app import Runtime, create_app

__all__ = ["Runtime", "create_app"]
