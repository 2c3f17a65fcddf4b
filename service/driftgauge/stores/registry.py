"""The store kinds: each subpackage of driftgauge.stores with a `kind` module exports one KIND.

Adding a kind is adding such a subpackage: the config union, the loader's view checks,
secret resolution and the adapter opener all come from its KIND, and features ask for a
capability by name instead of testing for a kind.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftgauge.config.runtime import Store, View
from driftgauge.config.secrets import Secret
from driftgauge.config.values import Strict
from driftgauge.core.errors import StoreError
from driftgauge.stores.base import StoreAdapter

HERE = Path(__file__).parent
PACKAGE = __name__.rsplit(".", 1)[0]
SLOT_FIRST_PASS = "slot first pass"
"""The adapter returns day buckets and their slots from one scan (stores.base.SlotFirstPass)."""
CANARY_WRITER = "canary writer"
"""A canary can write its sentinel to this store and read it back through a reader view."""
VOCABULARY_COUNTER = "vocabulary counter"
"""A source here counts rows per value of a column (stores.base.VocabularyCounter)."""
KEY_PICKER = "key picker"
"""A source here runs an operator's key query for the canary (stores.base.KeyQuery)."""
COMPOSITE_KEYS = "composite keys"
"""A view here may have a key of several columns (config `key: [a, b]`, View.key_parts)."""
MEASURE_TOTALS = "measure totals"
"""Day and hour buckets here carry each declared measure's exact total (Aggregate.measures)."""
SCALED_MEASURES = "scaled measures"
"""Measures sum here only as scaled 64-bit integers, so a check must say measure_scale."""
RETRIED_READS = "retried reads"
"""Reads go through the retry layer (driftgauge_store_retries_total counts them)."""
LOOKUP3_ROW_HASH = "lookup3 row hash"
"""The store computes the lookup3 row hash in the store, cheaper than md5 (docs/digest.md)."""


class StoreModel(Strict):
    """What every `stores.NAME` model has: its kind, narrowed to a Literal by each kind."""

    kind: str


Build = Callable[[str, Any, list[str]], Store]
"""(store name, validated config model, problems) → the runtime store; problems appended."""
CheckView = Callable[[str, Any, Sequence[Any], list[str]], None]
"""(location, view model, exclusion models, problems): append what this kind refuses."""
Open = Callable[[View, Any], Awaitable[StoreAdapter]]
"""(view, the store's shared connection or None) → an adapter; None: it opens its own."""
Connect = Callable[[Store], Awaitable[Any]]
"""Open the connection pool or client every view of one store shares."""
Disconnect = Callable[[Any], Awaitable[None]]
ErrorMap = Callable[[str, str, BaseException], StoreError | None]
"""(store name, what was being done, exception) → our StoreError; for an exception that is
not the store's doing but a bug: None (the caller lets it propagate) or the bug re-raised."""
Secrets = Callable[[Store], list[tuple[str, Secret, str]]]
"""The store's secret references: (field, secret, "dsn" or "password")."""
Coverage = Callable[[Store], str]
"""(store) → which rows of a window a check on it reads, in words the API shows."""
EVERY_ROW = "every row of the window"


def every_row(store: Store) -> str:
    """Return the coverage of a store that reads every row of a window."""
    return EVERY_ROW


@dataclass(frozen=True)
class StoreKind:
    """Everything driftgauge knows about one kind of store, in one object."""

    name: str
    config_model: type[StoreModel]
    """The `stores.NAME` model; its `kind` field is Literal[name]."""
    build: Build
    check_view: CheckView
    connect: Connect
    disconnect: Disconnect
    open: Open
    error_map: ErrorMap
    secrets: Secrets
    capabilities: frozenset[str] = frozenset()
    coverage: Coverage = every_row

    def has(self, capability: str) -> bool:
        """Return True when this kind offers `capability`."""
        return capability in self.capabilities


@functools.cache
def kinds() -> dict[str, StoreKind]:
    """Return every store kind by name, from the subpackages that have a `kind` module."""
    found: dict[str, StoreKind] = {}
    for info in sorted(pkgutil.iter_modules([str(HERE)]), key=lambda i: i.name):
        module = f"{PACKAGE}.{info.name}.kind"
        if not info.ispkg or importlib.util.find_spec(module) is None:
            continue
        kind = importlib.import_module(module).KIND
        if not isinstance(kind, StoreKind) or kind.name in found:
            raise RuntimeError(f"{module}: KIND must be one StoreKind with a new name")
        found[kind.name] = kind
    return found


def kind_of(name: str) -> StoreKind:
    """Return the store kind called `name`; ValueError if there is none."""
    try:
        return kinds()[name]
    except KeyError:
        raise ValueError(f"no store kind {name!r} (known: {', '.join(kinds())})") from None


def with_capability(capability: str) -> list[str]:
    """Return the names of the kinds that offer `capability`."""
    return [name for name, kind in kinds().items() if kind.has(capability)]
