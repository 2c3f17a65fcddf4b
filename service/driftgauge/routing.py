"""What the feature routers ask of the app they are mounted in: their running service."""

from typing import Any

from fastapi import HTTPException, Request, status


def app_service(request: Request, name: str, missing: str) -> Any:
    """Return `app.state.<name>`; answer 503 with `missing` while it is not running."""
    service = getattr(request.app.state, name, None)
    if service is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, missing)
    return service
