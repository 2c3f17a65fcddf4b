"""The local stores a test, bench or demo uses, named in one place.

An address comes from its DRIFTGAUGE_TEST_* variable when one is set (the run names its
store), else from `deploy/local/stack.sh env`, which derives every address from
DRIFTGAUGE_PG_PORT, DRIFTGAUGE_OS_PORT, DRIFTGAUGE_MARIADB_PORT and DRIFTGAUGE_ES_PORT.
A derived address must reach a store this checkout started: `unowned()` says which do
not (another checkout's server on the same port would hand its data to our tests).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = (
    "DRIFTGAUGE_TEST_PG_DSN",
    "DRIFTGAUGE_TEST_MARIADB_DSN",
    "DRIFTGAUGE_TEST_OS_URL",
    "DRIFTGAUGE_TEST_ES_URL",
)


@functools.cache
def derived() -> dict[str, str]:
    """Return every address as the stack scripts derive it (ignoring DRIFTGAUGE_TEST_*)."""
    env = {k: v for k, v in os.environ.items() if k not in NAMES}
    out = subprocess.run(
        ["bash", str(ROOT / "deploy" / "local" / "stack.sh"), "env"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=30,
    ).stdout
    found = {}
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export ") :].partition("=")
            found[key] = value
    return found


def address(name: str) -> str:
    """Return the address of one store: its variable if set, else the derived one."""
    return os.environ.get(name) or derived()[name]


def local_dir() -> Path:
    """Return where this checkout's stack scripts keep their stores (DRIFTGAUGE_LOCAL_DIR)."""
    return Path(os.environ.get("DRIFTGAUGE_LOCAL_DIR") or ROOT / ".local").resolve()


def _pg_home(dsn: str) -> str | None:
    import asyncpg

    async def read() -> str | None:
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError, TimeoutError):
            return None  # down: the tests that need it say so themselves
        try:
            return str(await conn.fetchval("SHOW data_directory"))
        finally:
            await conn.close()

    return asyncio.run(read())


def _cluster_home(url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{url}/_nodes/_local/settings", timeout=5) as resp:
            nodes = json.load(resp)["nodes"]
    except (OSError, ValueError, KeyError):
        return None
    homes = [n.get("settings", {}).get("path", {}).get("home") for n in nodes.values()]
    return str(homes[0]) if homes and homes[0] else ""


def _mariadb_home(dsn: str) -> str | None:
    from urllib.parse import urlsplit

    import pymysql

    parts = urlsplit(dsn)
    try:
        conn = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
            connect_timeout=5,
        )
    except pymysql.MySQLError:
        return None
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@datadir")
            row = cur.fetchone()
            return str(row[0]) if row else ""
    finally:
        conn.close()


HOMES = {
    "DRIFTGAUGE_TEST_PG_DSN": _pg_home,
    "DRIFTGAUGE_TEST_MARIADB_DSN": _mariadb_home,
    "DRIFTGAUGE_TEST_OS_URL": _cluster_home,
    "DRIFTGAUGE_TEST_ES_URL": _cluster_home,
}


def unowned() -> list[str]:
    """Return a problem per derived address whose store lives outside this checkout.

    An address the run named (a variable set to something else than the derived value)
    is the run's choice and is not checked; a store that is down is not either.
    """
    problems = []
    mine = local_dir()
    for name, home_of in HOMES.items():
        value = address(name)
        if os.environ.get(name) not in (None, "", derived()[name]):
            continue
        home = home_of(value)
        if home is None:
            continue
        if not Path(home).resolve().is_relative_to(mine):
            problems.append(
                f"{name}={value} reaches a store kept in {home or 'an unknown place'}, not"
                f" in this checkout's {mine}: another checkout's stack holds that port."
                " Move this checkout's ports (DRIFTGAUGE_PG_PORT, DRIFTGAUGE_OS_PORT,"
                " DRIFTGAUGE_MARIADB_PORT, DRIFTGAUGE_ES_PORT) and run `make services`,"
                f" or name the store to use with {name}."
            )
    return problems
