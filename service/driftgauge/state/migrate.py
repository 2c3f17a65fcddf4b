"""Apply the versioned SQL migrations under `state/migrations/`, once, across replicas."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One SQL file: its version number, name and text."""

    version: int
    name: str
    sql: str


def lock_key(*parts: str) -> int:
    """Return a stable signed 64-bit advisory-lock key for the given parts."""
    raw = hashlib.md5("\x00".join(("driftgauge", *parts)).encode()).digest()[:8]
    return int.from_bytes(raw, "big", signed=True)


def migrations() -> list[Migration]:
    """Return the packaged migrations in version order."""
    found = []
    for entry in resources.files("driftgauge.state").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match is None:
            continue
        found.append(
            Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8"))
        )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions in {versions}")
    return found


def quote_ident(name: str) -> str:
    """Return a PostgreSQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


async def apply(conn: Any, schema: str) -> list[int]:
    """Bring `schema` up to date on one connection; return the versions applied now."""
    applied_now: list[int] = []
    async with conn.transaction():
        # Replicas starting together serialise here; the loser sees every version applied.
        await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key("migrate", schema))
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        await conn.execute(f"SET LOCAL search_path TO {quote_ident(schema)}")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for m in migrations():
            if m.version in done:
                continue
            await conn.execute(m.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name
            )
            applied_now.append(m.version)
    return applied_now
