"""The drill-down page at `/` and the static files it and /docs load (shipped in the package)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent / "static"
# The page loads nothing but this server's own files and API: no CDN, works offline.
PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def add_page(app: FastAPI) -> None:
    """Serve the page at `/` and the package's static files under `/static/`.

    The page holds no data: it reads the API, which asks for the token where it must.
    """
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(
            STATIC / "index.html",
            media_type="text/html",
            headers={
                "Content-Security-Policy": PAGE_POLICY,
                "Cache-Control": "no-cache",
                "Referrer-Policy": "no-referrer",
            },
        )
