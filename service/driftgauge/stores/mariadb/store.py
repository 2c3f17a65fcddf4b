"""The runtime settings of one configured MariaDB / MySQL store."""

from __future__ import annotations

from dataclasses import dataclass

from driftgauge.config.secrets import Secret


@dataclass(frozen=True)
class MariaDBStore:
    """A MariaDB (or MySQL) store reached through an aiomysql pool."""

    name: str
    dsn: Secret
    timeout: float = 30.0
    pool_max: int = 4
    kind: str = "mariadb"
