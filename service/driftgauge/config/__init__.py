"""Configuration: YAML models, frozen runtime objects and the loader."""

from driftgauge.config.loader import load_file, load_text, parse_duration
from driftgauge.config.runtime import (
    Check,
    Config,
    Field,
    OpenSearchStore,
    PostgresStore,
    Store,
    View,
)
from driftgauge.config.secrets import Secret

__all__ = [
    "Check",
    "Config",
    "Field",
    "OpenSearchStore",
    "PostgresStore",
    "Secret",
    "Store",
    "View",
    "load_file",
    "load_text",
    "parse_duration",
]
