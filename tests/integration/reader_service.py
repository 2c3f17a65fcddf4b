"""A small reader service over an OpenSearch index, as an application's API serves readers.

It has what real reader APIs have and an index-level check cannot see: its own filter
(rows with a hidden status are never served), bearer auth, cursor (an offset) or page
pagination over rows sorted by key, and faults to plant: a pagination bug (`skip_page`: the
cursor jumps a page), a page that fails before it answers, a row served without its key.
Served by uvicorn on a free port in a thread of its own.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Query
from opensearchpy import OpenSearch

TOKEN = "reader-token"


@dataclass
class Behaviour:
    """What the service does; tests change it between runs."""

    hidden_status: str | None = "internal"
    skip_page: int | None = None
    """After serving this page (1-based), the next cursor skips one page."""
    fail_status: int | None = None
    flaky_page: int | None = None
    """This page (1-based) answers 500 `flaky_failures` times, then its rows."""
    flaky_failures: int = 0
    keyless_row: int | None = None
    """The row at this position of the whole answer is served without its `id`."""
    delay: float = 0.0
    """Seconds every answer takes."""
    requests: int = 0


def make_app(os_url: str, index: str, behaviour: Behaviour) -> FastAPI:
    """Return the service's app reading `index`."""
    app = FastAPI()
    client = OpenSearch(hosts=[os_url], timeout=30)

    @app.get("/v1/orders")
    def orders(
        start: str = Query(alias="from"),
        end: str = Query(alias="to"),
        limit: int = 50,
        cursor: int = 0,
        page: int | None = None,
        view: str = "full",
        authorization: str = Header(""),
    ) -> dict[str, Any]:
        behaviour.requests += 1
        time.sleep(behaviour.delay)
        if page is not None:  # page numbers from 1, for clients that page by number
            cursor = (page - 1) * limit
        if authorization != f"Bearer {TOKEN}":
            raise HTTPException(401, "a bearer token is required")
        if behaviour.fail_status is not None:
            raise HTTPException(behaviour.fail_status, "planted failure")
        if behaviour.flaky_page == cursor // limit + 1 and behaviour.flaky_failures > 0:
            behaviour.flaky_failures -= 1
            raise HTTPException(500, "planted transient failure")
        must: list[dict[str, Any]] = [{"range": {"updated_at": {"gte": start, "lt": end}}}]
        must_not = (
            []
            if behaviour.hidden_status is None
            else [{"term": {"status": behaviour.hidden_status}}]
        )
        hits = client.search(
            index=index,
            body={
                "size": 10_000,
                "sort": [{"order_id": "asc"}, {"_doc": "asc"}],
                "query": {"bool": {"filter": must, "must_not": must_not}},
            },
        )["hits"]["hits"]
        chunk = hits[cursor : cursor + limit]
        step = limit * (2 if behaviour.skip_page == cursor // limit + 1 else 1)
        nxt = cursor + step if cursor + limit < len(hits) else None
        items = [
            {
                "id": h["_source"]["order_id"],
                "updated_at": h["_source"]["updated_at"],
                "attributes": {
                    "status": h["_source"]["status"],
                    "amount": h["_source"]["amount"],
                },
            }
            for h in chunk
        ]
        if behaviour.keyless_row is not None and 0 <= behaviour.keyless_row - cursor < len(items):
            del items[behaviour.keyless_row - cursor]["id"]
        return {"data": {"items": items}, "meta": {"next": nxt, "view": view}}

    return app


class ReaderService:
    """The app served by uvicorn on 127.0.0.1 at a free port, in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        """Return the service's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start serving and wait until the server accepts requests."""
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the reader service did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
