"""The mariadb store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field

from driftgauge.config.values import SecretRef
from driftgauge.stores.sql.settings import PooledStore, PooledStoreModel

SCHEMES = ("mysql", "mariadb")


@dataclass(frozen=True)
class MariaDBStore(PooledStore):
    """A MariaDB (or MySQL) store reached through an aiomysql pool."""

    kind: str = "mariadb"


class MariaDBStoreModel(PooledStoreModel):
    kind: Literal["mariadb"]
    dsn: SecretRef = Field(
        description="mysql://user:password@host:port/database, usually a "
        "secret reference (env:NAME)."
    )


def dsn_shape(value: str) -> str | None:
    """Return why `value` is no mysql:// (or mariadb://) URL (without showing it), or None."""
    try:
        parts = urlsplit(value.strip())
        ok = parts.scheme in SCHEMES and bool(parts.hostname) and bool(parts.path.strip("/"))
    except ValueError:
        ok = False
    if not ok:
        return "must be a mysql://user:password@host:port/database URL (the value is not shown)"
    return None
