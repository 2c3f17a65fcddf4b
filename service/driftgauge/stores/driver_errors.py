"""A store kind's `translate_error`: its driver's errors mapped to ours, any other one raised."""

from __future__ import annotations

from collections.abc import Callable

from driftgauge.core.errors import (
    StoreError,
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)

StoreErrorOf = Callable[[str, str, BaseException], StoreError]


def of_types(types: tuple[type[BaseException], ...]) -> Callable[[BaseException], bool]:
    """Return a kind's driver_error: True when an exception is one of its driver's `types`."""

    def driver_error(exc: BaseException) -> bool:
        """Return True for the driver's doing (mapped), False for a bug."""
        return isinstance(exc, types)

    return driver_error


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


def server_error(
    store: str,
    what: str,
    exc: BaseException,
    message: str,
    *,
    cancelled: bool,
    denied: bool,
    unreachable: bool,
) -> StoreError:
    """Return our exception for a query server's error, its `message` as the kind reads it.

    Ours is returned as it is; then a timeout (or the server's word that it `cancelled`
    the query), a refusal the server `denied`, a server the client found `unreachable`,
    and any other failure is the query's.
    """
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, TimeoutError) or cancelled:
        return StoreTimeout(store, f"{what}: no answer within the timeout")
    if denied:
        return StorePermissionError(store, f"{what}: {message}")
    if unreachable:
        return StoreUnavailable(store, f"{what}: cannot reach the server ({message})")
    return StoreQueryError(store, f"{what}: {message}")
