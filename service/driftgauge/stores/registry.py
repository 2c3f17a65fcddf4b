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

from pydantic import Field

from driftgauge.config.frozen import Store, View
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
    max_concurrent_queries: int | None = Field(
        None,
        ge=1,
        le=1000,
        description=(
            "At most this many queries at once on this store, over every check and side that"
            " uses it in one replica; further queries wait their turn, first come first"
            " served. Unset: no limit beyond the store's own pool."
        ),
    )
    parallel_scans: int = Field(
        1,
        ge=1,
        le=32,
        description=(
            "Split a side's first pass over a window of several days into this many range"
            " queries of whole days, run at once (each counts against"
            " max_concurrent_queries). Set it above 1 only when the store has the cores to"
            " spare: it multiplies the load a run puts on the store while it scans."
        ),
    )


@dataclass(frozen=True, kw_only=True)
class StoreLimits:
    """The runtime half of StoreModel's shared fields: the load a store may take from us."""

    max_concurrent_queries: int | None = None
    """At most this many queries at once in one replica (stores.NAME.max_concurrent_queries)."""
    parallel_scans: int = 1
    """Range queries a first pass over many days is split into (stores.NAME.parallel_scans)."""


Build = Callable[[str, Any, list[str]], Store]
"""(store name, validated config model, problems) → the runtime store; problems appended."""
CheckView = Callable[[str, Any, Sequence[Any], list[str]], None]
"""(location, view model, exclusion models, problems): append what this kind refuses."""
Open = Callable[[View, Any], Awaitable[StoreAdapter]]
"""(view, the store's shared connection or None) → an adapter; None: it opens its own."""
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


def refuse_keys(where: str, vm: Any, keys: Sequence[str], why: str, problems: list[str]) -> None:
    """Append a problem for each of the view's `keys` that is set: this kind has no use for it."""
    problems.extend(f"{where}.{key}: {why}" for key in keys if getattr(vm, key) is not None)


def check_exclusions(
    where: str, exclusions: Sequence[Any], kind: str, field: str, language: str, problems: list[str]
) -> None:
    """Append a problem for each exclusion not written in `field` alone, the kind's `language`."""
    article = "an" if kind[0] in "aeiou" else "a"
    other = "query" if field == "where" else "where"
    for i, ex in enumerate(exclusions):
        if getattr(ex, field) is None or getattr(ex, other) is not None:
            problems.append(
                f"{where.rsplit('.', 1)[0]}.exclusions.{i}: {article} {kind} source "
                f"excludes rows with '{field}' ({language})"
            )


@dataclass(frozen=True)
class StoreKind:
    """Everything driftgauge knows about one kind of store, in one object.

    The kind's code lives in subpackage `package`. Its I/O module (`io`) opens the handle
    every view of a store shares (`store_pool`), closes it (`close_pool`) and maps its
    driver's errors (`translate_error`); class `adapter` of its `adapter` module opens a
    view on that handle. They are named, not imported, so a configuration that does not
    use the kind never loads its driver.
    """

    package: str
    adapter: str
    config_model: type[StoreModel]
    """The `stores.NAME` model; its `kind` field is Literal[name]."""
    build: Build
    check_view: CheckView
    secrets: Secrets
    capabilities: frozenset[str] = frozenset()
    coverage: Coverage = every_row
    io: str = "io"
    name: str = ""
    """The kind's name; by default its subpackage's."""
    errors: ErrorMap | None = None
    """The kind's own error map, for an I/O module whose translate_error maps bugs too."""
    opener: Open | None = None
    """The kind's own opener, for a kind that opens another kind's adapter its own way."""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.package.rsplit(".", 1)[-1])

    def has(self, capability: str) -> bool:
        """Return True when this kind offers `capability`."""
        return capability in self.capabilities

    def _module(self, name: str) -> Any:
        return importlib.import_module(f"{self.package}.{name}")

    async def connect(self, store: Store) -> Any:
        """Return the handle every view of the store shares."""
        return await self._module(self.io).store_pool(store)

    async def disconnect(self, handle: Any) -> None:
        """Close a handle opened by connect."""
        await self._module(self.io).close_pool(handle)

    async def open(self, view: View, handle: Any) -> StoreAdapter:
        """Return an adapter on the shared handle, or on a handle of its own when None."""
        if self.opener is not None:
            return await self.opener(view, handle)
        opened: StoreAdapter = await getattr(self._module("adapter"), self.adapter).open(
            view, handle
        )
        return opened

    def error_map(self, store: str, what: str, exc: BaseException) -> StoreError | None:
        """Return our exception for a driver error; a bug is not mapped (see ErrorMap)."""
        if self.errors is not None:
            return self.errors(store, what, exc)
        mapped: StoreError | None = self._module(self.io).translate_error(store, what, exc)
        return mapped


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
