"""Fault proxies of our own, in front of the real stores: one for HTTP, one for raw TCP.

HttpFaultProxy reads each HTTP/1.1 request, forwards it upstream on a fresh connection
(uncompressed, so answers can be rewritten) and answers the client, injecting the armed
faults into a seeded share of the matching requests. TcpFaultProxy pipes bytes (for
PostgreSQL's wire protocol) and can refuse, hang or reset the connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

HttpFaultKind = Literal[
    "status", "hang", "reset", "truncate", "failed_shard", "timed_out", "drop_hit"
]
ERROR_BODIES: dict[str, dict[str, Any]] = {
    "queue": {
        "type": "es_rejected_execution_exception",
        "reason": "rejected execution of coordinating operation [shard_detail=[x][0]"
        "]; queue capacity = 1000",
    },
    "breaker": {
        "type": "circuit_breaking_exception",
        "reason": "[parent] Data too large, data for [<http_request>] would be "
        "[1073741824/1gb], which is larger than the limit",
        "bytes_wanted": 1073741824,
        "durability": "TRANSIENT",
    },
    "scroll": {
        "type": "exception",
        "reason": "Trying to create too many scroll contexts. "
        "Must be less than or equal to: [500].",
    },
    "unavailable": {"type": "cluster_manager_not_discovered_exception", "reason": None},
}


@dataclass
class Fault:
    """One HTTP fault: what to do to a share of the requests whose line matches `match`."""

    kind: HttpFaultKind
    share: float = 1.0
    match: str = ""
    """Regex searched in "METHOD /path?query"; empty matches every request."""
    status: int = 429
    retry_after: str | None = None
    cause: str = "queue"
    """Key of ERROR_BODIES for a status fault."""
    limit: int | None = None
    """Inject at most this many times."""
    injected: int = 0


@dataclass
class Seen:
    """One request the proxy received, and what it did to it."""

    at: float
    line: str
    fault: str | None


Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class _Listening:
    """Both proxies' listening socket and the connections open through it."""

    port: int
    _server: asyncio.Server | None
    _open: set[asyncio.StreamWriter]

    async def _listen(
        self, serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
    ) -> None:
        """Listen on `port` (a free one while it is 0), handing each connection to `serve`."""
        self._server = await asyncio.start_server(serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def refuse(self) -> None:
        """Stop listening and reset every open connection: new connections are refused."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._open):
            _rst(w)


@dataclass
class HttpFaultProxy(_Listening):
    """An HTTP proxy in front of `upstream` that injects the armed faults."""

    upstream: tuple[str, int]
    seed: int = 0
    faults: list[Fault] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)
    _rng: random.Random = field(default_factory=random.Random)

    @property
    def url(self) -> str:
        """Return the proxy's base URL."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen (again on the same port once it is known)."""
        await self._listen(self._serve)

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        await self.refuse()

    def arm(self, *faults: Fault) -> None:
        """Replace the armed faults and reseed, so a case sees the same share each time."""
        self.faults = list(faults)
        self.seen.clear()
        self._rng = random.Random(self.seed)

    def disarm(self) -> None:
        """Let every request through again, keeping the record of what was seen."""
        self.faults = []

    def injected(self, kind: str | None = None) -> int:
        """Return how many requests got a fault (of `kind`)."""
        return sum(
            1 for s in self.seen if s.fault is not None and (kind is None or s.fault == kind)
        )

    def _pick(self, line: str) -> Fault | None:
        for f in self.faults:
            if f.match and not re.search(f.match, line):
                continue
            if f.limit is not None and f.injected >= f.limit:
                continue
            if self._rng.random() < f.share:
                f.injected += 1
                return f
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                head, body = request
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                method, target = line.split(" ")[:2]
                fault = self._pick(f"{method} {target}")
                self.seen.append(
                    Seen(time.monotonic(), f"{method} {target}", fault.kind if fault else None)
                )
                if not await self._answer(fault, head, body, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._open.discard(writer)
            writer.close()

    async def _answer(
        self,
        fault: Fault | None,
        head: bytes,
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; return False when the connection must end."""
        if fault is not None and fault.kind == "hang":
            await reader.read()  # until the client gives up and closes
            return False
        if fault is not None and fault.kind == "status":
            payload = json.dumps(
                {
                    "error": {
                        "root_cause": [ERROR_BODIES[fault.cause]],
                        **ERROR_BODIES[fault.cause],
                    },
                    "status": fault.status,
                }
            ).encode()
            extra = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            writer.write(_response(fault.status, "Fault", payload, extra))
            await writer.drain()
            return True
        status, reason, headers, payload = await self._forward(head, body)
        if fault is None:
            writer.write(_response(status, reason, payload, headers))
        elif fault.kind == "reset":
            # The whole head and half the body, then a TCP reset.
            writer.write(_response(status, reason, payload, headers)[: -(len(payload) // 2)])
            await writer.drain()
            _rst(writer)
            return False
        elif fault.kind == "truncate":
            # Framing stays consistent: the client reads a complete, cut JSON body.
            writer.write(_response(status, reason, payload[: len(payload) // 2], headers))
        else:
            writer.write(_response(status, reason, _rewrite(fault.kind, payload), headers))
        await writer.drain()
        return True

    async def _forward(self, head: bytes, body: bytes) -> tuple[int, str, dict[str, str], bytes]:
        lines = head.decode("latin-1").split("\r\n")
        kept = [
            h
            for h in lines[1:]
            if h and h.split(":", 1)[0].lower() not in ("accept-encoding", "connection")
        ]
        request = "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1")
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        try:
            up_writer.write(request + body)
            await up_writer.drain()
            return await _read_response(up_reader)
        finally:
            up_writer.close()


def _rewrite(kind: str, payload: bytes) -> bytes:
    """Return the answer with a failed shard, timed_out or one hit fewer."""
    try:
        doc = json.loads(payload)
    except ValueError:
        return payload
    if not isinstance(doc, dict):
        return payload
    shards = doc.get("_shards")
    if kind == "failed_shard" and isinstance(shards, dict):
        # What a shard lost mid-request looks like: still HTTP 200.
        shards["successful"] = max(0, int(shards.get("successful", 1)) - 1)
        shards["failed"] = int(shards.get("failed", 0)) + 1
        shards["failures"] = [
            {
                "shard": 0,
                "index": "faulted",
                "node": "n1",
                "reason": {"type": "node_disconnected_exception", "reason": "[n1] disconnected"},
            }
        ]
    elif kind == "timed_out" and "timed_out" in doc:
        doc["timed_out"] = True
    elif kind == "drop_hit":
        hits = doc.get("hits", {}).get("hits")
        if isinstance(hits, list) and hits:
            hits.pop()
    return json.dumps(doc).encode()


def _response(
    status: int, reason: str, payload: bytes, headers: dict[str, str] | None = None
) -> bytes:
    keep = {
        k: v
        for k, v in (headers or {}).items()
        if k.lower()
        not in ("content-length", "transfer-encoding", "connection", "content-encoding")
    }
    keep.setdefault("content-type", "application/json; charset=UTF-8")
    lines = [
        f"HTTP/1.1 {status} {reason}",
        *[f"{k}: {v}" for k, v in keep.items()],
        f"content-length: {len(payload)}",
        "",
        "",
    ]
    return "\r\n".join(lines).encode("latin-1") + payload


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = _header(head, "content-length")
    body = await reader.readexactly(int(length)) if length else b""
    return head, body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, str, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    _, status, *reason = lines[0].split(" ")
    headers = dict(h.split(": ", 1) for h in lines[1:] if ": " in h)
    length = _header(head, "content-length")
    if length is not None:
        payload = await reader.readexactly(int(length))
    elif (_header(head, "transfer-encoding") or "").lower() == "chunked":
        payload = await _read_chunked(reader)
    else:
        payload = await reader.read()
    return int(status), " ".join(reason), headers, payload


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    out = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return bytes(out)
        out += await reader.readexactly(size)
        await reader.readexactly(2)


def _header(head: bytes, name: str) -> str | None:
    for line in head.decode("latin-1").split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset rather than a clean FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


TcpMode = Literal["pass", "hang", "reset"]


@dataclass
class TcpFaultProxy(_Listening):
    """A byte pipe to `upstream` that can refuse, hang or reset its connections."""

    upstream: tuple[str, int]
    mode: TcpMode = "pass"
    port: int = 0
    _server: asyncio.Server | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)
    _resume: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        """Listen (again on the same port once it is known) and pass bytes through."""
        self.set_mode("pass")
        await self._listen(self._serve)

    def set_mode(self, mode: TcpMode) -> None:
        """Pass bytes, hold them (hang) or reset at the next server bytes (reset)."""
        self.mode = mode
        if mode == "hang":
            self._resume.clear()
        else:
            self._resume.set()

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        self.set_mode("pass")
        await self.refuse()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _rst(writer)
            return
        self._open |= {writer, up_writer}
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, to_client=None),
                self._pump(up_reader, writer, to_client=up_writer),
            )
        except (ConnectionError, OSError):
            pass
        finally:
            self._open -= {writer, up_writer}
            for w in (writer, up_writer):
                w.close()

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        *,
        to_client: asyncio.StreamWriter | None,
    ) -> None:
        while True:
            data = await src.read(65536)
            if not data:
                dst.close()
                return
            while self.mode == "hang":
                await self._resume.wait()
            if self.mode == "reset" and to_client is not None:
                dst.write(data[: len(data) // 2])
                await dst.drain()
                _rst(dst)
                _rst(to_client)
                return
            dst.write(data)
            await dst.drain()
