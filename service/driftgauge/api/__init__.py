"""The REST API and /metrics, served by FastAPI."""
