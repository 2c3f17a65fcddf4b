"""A collector part that serves the latest snapshot read from the state database."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, Protocol, TypeVar

from prometheus_client.core import Metric

S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)


class SnapshotStore(Protocol[S_co]):
    """A store that reads one snapshot for a list of checks or jobs."""

    async def snapshot(self, names: list[str]) -> S_co:
        """Return the current snapshot for these names."""
        ...


class StoredPart(Generic[S]):
    """Yield families from the latest snapshot; `refresh` reloads it.

    Scrapes never touch the database, and a failed refresh keeps the previous snapshot,
    so a state-database hiccup never publishes zeros.
    """

    def __init__(self, store: SnapshotStore[S], names: Sequence[str]) -> None:
        self._store = store
        self._names = sorted(names)
        self._snap: S | None = None

    async def refresh(self) -> None:
        """Reload the snapshot from the state database (raises StateError on failure)."""
        self._snap = await self._store.snapshot(self._names)

    def __call__(self) -> Iterable[Metric]:
        """Return this part's families for one scrape (none before the first load)."""
        return [] if self._snap is None else self.families(self._snap)

    def families(self, snap: S) -> Iterable[Metric]:
        """Return the families for one snapshot."""
        raise NotImplementedError
