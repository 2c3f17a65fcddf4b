"""What the routers share: their router and access, running service, paging, errors as answers."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError

from driftgauge.core.errors import FieldError
from driftgauge.core.paging import Page

Dependency = Callable[..., Any]
"""A FastAPI dependency, such as the app's read or write token check."""
# PostgreSQL can hold any offset up to here, so a wild one is a 422, not a 503.
MAX_OFFSET = 10_000_000


def paged(default: int, most: int) -> Any:
    """Return the dependency of a paged list: `limit` (1 to `most`, else `default`), `offset`."""

    def page(
        limit: Annotated[
            int, Query(ge=1, le=most, description="At most this many items.")
        ] = default,
        offset: Annotated[
            int,
            Query(
                ge=0,
                le=MAX_OFFSET,
                description="Skip this many items first (the next page: offset + limit).",
            ),
        ] = 0,
    ) -> Page:
        return Page(limit, offset)

    return Depends(page)


@dataclass(frozen=True)
class FeatureRoutes:
    """A feature's router and the dependencies of its read routes and of its write routes."""

    router: APIRouter
    read: list[Any]
    write: list[Any]

    @classmethod
    def under(
        cls, prefix: str, require_write: Dependency, require_read: Dependency
    ) -> "FeatureRoutes":
        """Return an empty router at `prefix`, tagged with the prefix's name, and both lists."""
        router = APIRouter(prefix=prefix, tags=[prefix.strip("/")])
        return cls(router, read=[Depends(require_read)], write=[Depends(require_write)])


def app_service(name: str, missing: str) -> Callable[[Request], Any]:
    """Return a dependency giving `app.state.<name>`; it answers 503 with `missing` until set."""

    def running(request: Request) -> Any:
        service = getattr(request.app.state, name, None)
        if service is None:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, missing)
        return service

    return running


@contextmanager
def answered(
    not_found: type[Exception], conflicts: tuple[type[Exception], ...] = ()
) -> Iterator[None]:
    """Answer a feature's errors: `not_found` 404, `conflicts` 409, a FieldError 422 naming it."""
    try:
        yield
    except FieldError as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("body", exc.field), "msg": exc.problem, "input": None}]
        ) from None
    except not_found as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except conflicts as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
