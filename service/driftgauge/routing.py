"""What the feature routers share: their running service, paging and the 422 naming a field."""

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError

Dependency = Callable[..., Any]
"""A FastAPI dependency, such as the app's read or write token check."""
Offset = Annotated[
    int,
    Query(
        ge=0,
        le=10_000_000,
        description="Skip this many items first (the next page: offset + limit).",
    ),
]
"""The offset of a paged list; PostgreSQL can hold it, so a wild one is a 422, not a 503."""


def app_service(name: str, missing: str) -> Callable[[Request], Any]:
    """Return a dependency giving `app.state.<name>`; it answers 503 with `missing` until set."""

    def running(request: Request) -> Any:
        service = getattr(request.app.state, name, None)
        if service is None:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, missing)
        return service

    return running


def field_error(field: str, problem: str) -> RequestValidationError:
    """Return the 422 of bad input, naming the body field and its problem."""
    return RequestValidationError(
        [{"type": "value_error", "loc": ("body", field), "msg": problem, "input": None}]
    )
