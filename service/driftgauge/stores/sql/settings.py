"""The settings every pooled SQL store kind shares: a DSN, a call timeout and a pool size."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from driftgauge.config.secrets import Secret
from driftgauge.config.values import Seconds, SecretRef
from driftgauge.stores.registry import StoreLimits, StoreModel


@dataclass(frozen=True)
class PooledStore(StoreLimits):
    """A SQL store reached through a driver's connection pool; a kind names itself."""

    name: str
    dsn: Secret
    timeout: float = 30.0
    pool_max: int = 4
    kind: str = "sql"


class PooledStoreModel(StoreModel):
    """A `stores.NAME` entry of a pooled SQL kind; the kind narrows `kind` and says its DSN."""

    dsn: SecretRef
    timeout_seconds: Seconds = 30.0
    pool_max: int = Field(4, ge=1, le=100)
