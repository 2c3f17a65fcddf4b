"""The postgres store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from driftgauge.config.values import SecretRef
from driftgauge.stores.sql.settings import PooledStore, PooledStoreModel


@dataclass(frozen=True)
class PostgresStore(PooledStore):
    """A PostgreSQL store reached through an asyncpg pool."""

    kind: str = "postgres"


class PostgresStoreModel(PooledStoreModel):
    kind: Literal["postgres"]
    dsn: SecretRef = Field(description="Connection string, usually a secret reference (env:NAME).")
