"""The checks a feature serves (those with its settings), looked up by name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import datetime
from typing import ClassVar, Generic, TypeVar

from driftgauge.config.frozen import Check
from driftgauge.core.clock import utc_now
from driftgauge.core.errors import UnknownCheck

StoreT = TypeVar("StoreT")
SourceT = TypeVar("SourceT")


class ServedChecks:
    """The configured checks that have a feature's settings, by name."""

    def __init__(self, checks: Mapping[str, Check], serves: Callable[[Check], bool], what: str):
        self._checks = {n: c for n, c in checks.items() if serves(c)}
        self._what = what
        """What every served check has, for the error naming an unserved one."""

    @property
    def names(self) -> list[str]:
        """Return the names of the served checks, sorted."""
        return sorted(self._checks)

    def find(self, name: str) -> Check | None:
        """Return the served check of that name, or None."""
        return self._checks.get(name)

    def get(self, name: str) -> Check:
        """Return the served check of that name; raise UnknownCheck if there is none."""
        check = self._checks.get(name)
        if check is None:
            raise UnknownCheck(f"no check named {name!r} has {self._what}")
        return check


@dataclass(eq=False)
class FeatureService(Generic[StoreT, SourceT]):
    """A feature run on the checks it serves: it reads their source, records in its store."""

    configured: InitVar[Mapping[str, Check]]
    store: StoreT
    source: Callable[[Check], Awaitable[SourceT]]
    _: KW_ONLY
    clock: Callable[[], datetime] = utc_now
    _checks: ServedChecks = field(init=False)
    what: ClassVar[str]
    """What every served check has, for the error naming an unserved one."""

    def __post_init__(self, configured: Mapping[str, Check]) -> None:
        self._checks = ServedChecks(configured, self.serves, self.what)

    @staticmethod
    def serves(check: Check) -> bool:
        """Return whether the check has the feature's settings."""
        raise NotImplementedError

    @property
    def checks(self) -> list[str]:
        """Return the names of the checks the feature serves, sorted."""
        return self._checks.names
