"""The trino store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from driftgauge.config.secrets import Secret
from driftgauge.config.values import NonEmpty, Seconds, SecretRef
from driftgauge.stores.registry import StoreLimits, StoreModel


@dataclass(frozen=True)
class TrinoStore(StoreLimits):
    """A Trino coordinator: URL, default catalog and schema, user, credentials, TLS, timeout."""

    name: str
    url: str
    catalog: str | None = None
    schema: str | None = None
    user: str = "driftgauge"
    password: Secret | None = None
    token: Secret | None = None
    verify: bool | str = True
    timeout: float = 30.0
    kind: str = "trino"


class TrinoStoreModel(StoreModel):
    kind: Literal["trino"]
    url: NonEmpty = Field(description="http(s)://host:port of the Trino coordinator.")
    catalog: NonEmpty | None = Field(
        None, description="Catalog of unqualified table names (e.g. hive, postgresql)."
    )
    schema_: NonEmpty | None = Field(
        None, alias="schema", description="Schema of unqualified table names."
    )
    user: NonEmpty = Field("driftgauge", description="The user queries run as.")
    password: SecretRef | None = Field(
        None,
        description="Password of `user` (basic auth; needs https), usually a secret "
        "reference (env:NAME or file:/path).",
    )
    token: SecretRef | None = Field(
        None, description="Bearer token (JWT) sent instead of a password (env:NAME or file:/path)."
    )
    verify: bool | NonEmpty = Field(
        True,
        description="TLS: true checks the server's certificate against the system CAs, "
        "false does not check it, a path names a CA bundle to check it against.",
    )
    timeout_seconds: Seconds = 30.0

    @model_validator(mode="after")
    def _one_credential(self) -> Self:
        if self.password is not None and self.token is not None:
            raise ValueError("give either 'password' or 'token', not both")
        return self


def url_shape(value: str) -> str | None:
    """Return why `value` is no http(s)://host:port URL, or None."""
    try:
        parts = urlsplit(value.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        ok = ok and parts.port is not None and not parts.username and not parts.password
    except ValueError:
        ok = False
    if not ok:
        return "must be http(s)://host:port (give credentials with 'password' or 'token')"
    return None
