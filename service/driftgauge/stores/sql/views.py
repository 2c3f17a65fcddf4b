"""The view rules every SQL store kind shares: a query or a table, exclusions in SQL."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from driftgauge.core.errors import StoreError
from driftgauge.stores import registry
from driftgauge.stores.registry import CheckView

DIALECT_CAPABILITIES = frozenset(
    {
        registry.COMPOSITE_KEYS,
        registry.MEASURE_TOTALS,
        registry.SLOT_FIRST_PASS,
        registry.VOCABULARY_COUNTER,
        registry.KEY_PICKER,
    }
)
"""What the dialect-base kinds offer: composite keys, measures, first pass, counts, key query."""


def sql_view_check(kind: str) -> CheckView:
    """Return the view check of the SQL store kind called `kind` (its name in messages)."""

    def check_view(where: str, vm: Any, exclusions: Sequence[Any], problems: list[str]) -> None:
        if (vm.query is None) == (vm.table is None):
            problems.append(f"{where}: a {kind} view needs exactly one of 'query' or 'table'")
        registry.refuse_keys(where, vm, ("index", "filter"), "only for opensearch views", problems)
        registry.check_exclusions(where, exclusions, kind, "where", "an SQL predicate", problems)

    check_view.__doc__ = f"Append what a {kind} view (and its source's exclusions) gets wrong."
    return check_view


def sql_kind(
    package: str,
    adapter: str,
    model: type[Any],
    *,
    build: registry.Build,
    secrets: registry.Secrets,
    extra: frozenset[str] = frozenset(),
    errors: registry.ErrorMap | None = None,
) -> registry.StoreKind:
    """Return a SQL store kind: the shared view rules and capabilities (plus `extra`)."""
    return registry.StoreKind(
        package,
        adapter,
        model,
        build=build,
        check_view=sql_view_check(package.rsplit(".", 1)[-1]),
        secrets=secrets,
        capabilities=DIALECT_CAPABILITIES | extra,
        errors=errors,
    )


def lazy_error_map(io_module: str) -> registry.ErrorMap:
    """Return an error map that imports the kind's I/O module (and its driver) on first use."""

    def error_map(store: str, what: str, exc: BaseException) -> StoreError | None:
        io = importlib.import_module(io_module)
        if not io.driver_error(exc) and not isinstance(exc, StoreError):
            return None
        mapped: StoreError = io.store_error(store, what, exc)
        return mapped

    return error_map
