"""The state database's pool: opened on its schema, closed under a deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from driftgauge.config.frozen import State
from driftgauge.core.errors import SecretError, StateError
from driftgauge.pg.errors import DRIVER_ERRORS, describe


async def open_pool(
    state: State,
    *,
    deadline: float = 10.0,
    pool_max: int = 2,
    application: str = "driftgauge-signals",
) -> Any:
    """Open a pool on the state schema (migrations are applied by the StateStore)."""
    try:
        dsn = state.dsn.reveal()
    except SecretError as exc:
        raise StateError(f"state.dsn: {exc.problems[0]}") from None
    settings = {
        "search_path": '"' + state.schema.replace('"', '""') + '"',
        "application_name": application,
    }
    try:
        async with asyncio.timeout(deadline * 2):
            return await asyncpg.create_pool(
                dsn,
                min_size=1,
                max_size=pool_max,
                timeout=deadline,
                command_timeout=deadline,
                server_settings=settings,
            )
    except (*DRIVER_ERRORS, ValueError) as exc:  # ValueError: a DSN the driver cannot parse
        raise StateError(
            f"state.dsn: cannot connect to the state database ({describe(exc)})"
        ) from None


async def close_pool(pool: Any, seconds: float = 10.0) -> None:
    """Close a pool, waiting at most `seconds`."""
    await asyncio.wait_for(pool.close(), timeout=seconds)
