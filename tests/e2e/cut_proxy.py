"""A TCP proxy of our own in front of the shared PostgreSQL, that a test can cut and restore."""

from __future__ import annotations

import asyncio
import contextlib


class CutProxy:
    """Forward 127.0.0.1:`port` to a real server; `cut()` drops every connection and refuses."""

    def __init__(self, host: str, port: int, listen: int) -> None:
        self._target = (host, port)
        self.port = listen
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen (again) on the proxy's port."""
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )

    async def cut(self) -> None:
        """Stop listening and reset every forwarded connection, like a database gone away."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for w in list(self._open):
            w.transport.abort()
        self._open.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._open.discard(dst)
            with contextlib.suppress(OSError, RuntimeError):
                dst.transport.abort()
