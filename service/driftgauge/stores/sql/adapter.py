"""What every SQL adapter shares: its view, its store, the exclusion reasons, compiled SQL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from driftgauge.config.runtime import Store, View
from driftgauge.core.fields import TimestampPrecision


class SqlAdapter:
    """The base of the SQL adapters; a kind names itself, its store type and its queries."""

    kind: ClassVar[str] = "sql"
    """The store kind's name, in messages."""
    store_type: ClassVar[type[Any]] = object
    """The runtime store a view of this kind must name."""
    store: Store

    def __init__(self, view: View) -> None:
        self.view = view
        self.store = self.store_of(view)
        self._reasons = [ex.reason for ex in view.exclusions if ex.where is not None]
        self._compile()

    @classmethod
    def store_of(cls, view: View) -> Any:
        """Return the view's store; ValueError when it is not a store of this kind."""
        if not isinstance(view.store, cls.store_type):
            raise ValueError(f"a {cls.kind} view needs a {cls.kind} store")
        return view.store

    def _compile(self) -> None:
        """Build the view's queries; again whenever the timestamp precision changes."""

    def use_timestamp_precision(self, precision: TimestampPrecision) -> None:
        """Hash timestamp fields at `precision` from the next query on."""
        if precision != self.view.timestamp_precision:
            self.view = replace(self.view, timestamp_precision=precision)
            self._compile()

    def _where(self, what: str) -> str:
        target = self.view.table if self.view.table is not None else "view query"
        return f"{what} on {target}"
