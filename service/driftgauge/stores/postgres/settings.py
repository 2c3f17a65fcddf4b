"""The postgres store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from driftgauge.config.secrets import Secret
from driftgauge.config.values import Seconds, SecretRef
from driftgauge.stores.registry import StoreModel


@dataclass(frozen=True)
class PostgresStore:
    """A PostgreSQL store reached through an asyncpg pool."""

    name: str
    dsn: Secret
    timeout: float = 30.0
    pool_max: int = 4
    kind: str = "postgres"


class PostgresStoreModel(StoreModel):
    kind: Literal["postgres"]
    dsn: SecretRef = Field(description="Connection string, usually a secret reference "
                          "(env:NAME).")
    timeout_seconds: Seconds = 30.0
    pool_max: int = Field(4, ge=1, le=100)
