"""The spark store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field

from driftgauge.config.secrets import Secret
from driftgauge.config.values import NonEmpty, Seconds, SecretRef
from driftgauge.stores.registry import StoreLimits, StoreModel


@dataclass(frozen=True)
class SparkStore(StoreLimits):
    """A Spark Connect server: its sc:// URL, an optional bearer token and a call timeout."""

    name: str
    url: str
    token: Secret | None = None
    timeout: float = 30.0
    kind: str = "spark"


class SparkStoreModel(StoreModel):
    kind: Literal["spark"]
    url: NonEmpty = Field(description="sc://host:port of the Spark Connect server.")
    token: SecretRef | None = Field(
        None,
        description="Bearer token sent to the server (the client then uses TLS), usually "
        "a secret reference (env:NAME or file:/path).",
    )
    timeout_seconds: Seconds = 30.0


def url_shape(value: str) -> str | None:
    """Return why `value` is no sc://host:port URL, or None."""
    try:
        parts = urlsplit(value.strip())
        ok = parts.scheme == "sc" and bool(parts.hostname) and parts.port is not None
    except ValueError:
        ok = False
    if not ok or ";" in value:
        return "must be sc://host:port (give a token with 'token', not in the URL)"
    return None
