"""The duckdb kind's error map: each engine or file error maps to ours, a bug propagates."""

from __future__ import annotations

import duckdb
import pytest

from driftgauge.core.errors import (
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.stores import registry

MAPPED: list[tuple[BaseException, type[StoreError]]] = [
    (TimeoutError(), StoreTimeout),
    (duckdb.InterruptException("INTERRUPT Error: Interrupted!"), StoreTimeout),
    (duckdb.IOException("IO Error: No files found that match the pattern"), StoreUnavailable),
    (FileNotFoundError(2, "No such file"), StoreUnavailable),
    (duckdb.PermissionException("Permission Error"), StorePermissionError),
    (
        duckdb.CatalogException("Catalog Error: Table with name t does not exist!\n\nLINE 1"),
        StoreQueryError,
    ),
    (duckdb.BinderException("Binder Error: column x not found"), StoreQueryError),
    (duckdb.ConversionException("Conversion Error: Could not convert"), StoreQueryError),
]


@pytest.mark.parametrize(("exc", "mapped"), MAPPED, ids=lambda v: type(v).__name__)
def test_each_duckdb_error_maps(exc: BaseException, mapped: type[StoreError]) -> None:
    got = registry.kind_of("duckdb").error_map("lake", "read", exc)
    assert type(got) is mapped and str(got).startswith("lake: read")
    assert "LINE 1" not in str(got)  # the SQL caret block is left out of the message


def test_a_bug_is_re_raised_as_itself() -> None:
    bug = KeyError("k")
    with pytest.raises(KeyError) as raised:
        registry.kind_of("duckdb").error_map("lake", "read", bug)
    assert raised.value is bug
