"""What every repair part that reads a check's stores is built on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from driftgauge.config.frozen import Check
from driftgauge.core.paging import Page
from driftgauge.pg.calls import PgCalls
from driftgauge.repair.errors import RepairInputError
from driftgauge.stores.base import StoreAdapter

Sides = Callable[[str], Awaitable[tuple[StoreAdapter, StoreAdapter]]]
"""Return a check's (source, reader) adapters."""


class CheckParts:
    """Hold the state database, the checks, their (source, reader) adapters and the clock."""

    def __init__(
        self,
        calls: PgCalls,
        checks: Mapping[str, Check],
        sides: Sides,
        clock: Callable[[], datetime],
    ) -> None:
        self.calls = calls
        self.checks = checks
        self.sides = sides
        self.clock = clock

    def _check(self, name: str) -> Check:
        if name not in self.checks:
            raise RepairInputError("check", f"no such check {name!r}")
        return self.checks[name]


async def fetch_page(calls: PgCalls, what: str, query: str, page: Page, *args: Any) -> list[Any]:
    """Return one page of `query`'s records: its LIMIT and OFFSET come after `args`."""
    n = len(args)
    paged = f"{query} LIMIT ${n + 1} OFFSET ${n + 2}"
    return await calls.fetch(what, paged, *args, page.limit, page.offset)
