"""A store kind's `translate_error`: its driver's errors mapped to ours, any other one raised."""

from __future__ import annotations

from collections.abc import Callable

from driftgauge.core.errors import StoreError

StoreErrorOf = Callable[[str, str, BaseException], StoreError]


def raising_translator(
    driver_error: Callable[[BaseException], bool], store_error: StoreErrorOf
) -> StoreErrorOf:
    """Return a translate_error that maps a driver error (or ours) and raises anything else."""

    def translate_error(store: str, what: str, exc: BaseException) -> StoreError:
        """Return our exception for a driver error; anything else propagates (it is a bug)."""
        if driver_error(exc) or isinstance(exc, StoreError):
            return store_error(store, what, exc)
        raise exc

    return translate_error
