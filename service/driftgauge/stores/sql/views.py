"""The view rules every SQL store kind shares: a query or a table, exclusions in SQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
