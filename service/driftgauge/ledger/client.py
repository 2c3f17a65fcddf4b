"""A client for sync jobs: report one run to the driftgauge run ledger.

    async with LedgerClient(url, token=..., job="review-sync", window_start=s,
                            window_end=e, input_rows=len(rows)) as run:
        await run.written(["t1", "t2"])
        await run.no_match({"t4": "no_document"})

Leaving the block normally closes the run with a summary whose status is computed from the
reported outcomes. Leaving it with an exception sends what was reported but no summary, so
the run stays open and the ledger flags the window (`missing_summary`) at its deadline.
`SyncLedgerClient` is the same for code without an event loop. A run that recomputes the
partitions of a backfill passes `backfill_id=`, so the backfill lists it. Watermarks,
consumers and their reads have their own client, `driftgauge.repair.client.RepairClient`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, TypeVar

import httpx

from driftgauge.core.errors import DriftgaugeError
from driftgauge.ledger.models import Counts, Outcome, RunStatus
from driftgauge.ledger.rules import derive_status

RETRY_DELAYS = (0.5, 1.0, 2.0)
HttpT = TypeVar("HttpT", httpx.AsyncClient, httpx.Client)
TransportT = TypeVar("TransportT", httpx.AsyncBaseTransport, httpx.BaseTransport)


class LedgerClientError(DriftgaugeError):
    """The ledger refused a request or could not be reached; the message says which."""


class _Outbox:
    """Buffered outcomes of one run, cut into numbered batches (pure, no I/O)."""

    def __init__(self, client_run_id: str, batch_size: int) -> None:
        self.client_run_id = client_run_id
        self.batch_size = batch_size
        self.keys: list[dict[str, str]] = []
        self.counts: list[dict[str, Any]] = []
        self.tally = Counts()
        self.sent = 0

    def add_keys(self, outcome: Outcome, entries: Mapping[str, str] | Iterable[str]) -> None:
        detail = "error" if outcome == "failed" else "reason"
        if isinstance(entries, Mapping):
            new = [{"key": k, "outcome": outcome, detail: why} for k, why in entries.items()]
        else:
            new = [{"key": k, "outcome": outcome} for k in entries]
        self.keys.extend(new)
        self._count(outcome, len(new))

    def add_count(self, outcome: Outcome, count: int, why: str | None) -> None:
        entry: dict[str, Any] = {"outcome": outcome, "count": count}
        if why is not None:
            entry["error" if outcome == "failed" else "reason"] = why
        self.counts.append(entry)
        self._count(outcome, count)

    def _count(self, outcome: Outcome, n: int) -> None:
        # The server judges the counts it is sent; the local tally only adds them up.
        add = {
            "written": Counts.model_construct(written=n),
            "no_match": Counts.model_construct(no_match=n),
            "skipped": Counts.model_construct(skipped=n),
            "failed": Counts.model_construct(failed=n),
        }[outcome]
        self.tally = self.tally + add

    def full(self) -> bool:
        return len(self.keys) >= self.batch_size

    def take(self) -> dict[str, Any] | None:
        """Return the next batch to send (and forget it), or None when nothing is buffered."""
        if not self.keys and not self.counts:
            return None
        self.sent += 1
        batch = {
            "batch_id": f"{self.client_run_id}-{self.sent:06d}",
            "keys": self.keys[: self.batch_size],
            "counts": self.counts,
        }
        self.keys = self.keys[self.batch_size :]
        self.counts = []
        return batch


def _open_body(
    job: str, window_start: datetime, window_end: datetime, input_rows: int, client_run_id: str
) -> dict[str, Any]:
    return {
        "job": job,
        "window_start": window_start.isoformat(),
        "window_end": window_end.isoformat(),
        "input_rows": input_rows,
        "client_run_id": client_run_id,
    }


def _summary(
    tally: Counts, input_rows: int, status: RunStatus | None, message: str | None
) -> dict[str, Any]:
    counts = tally.model_dump()
    body: dict[str, Any] = {"status": status or derive_status(input_rows, tally), "counts": counts}
    if message is not None:
        body["message"] = message
    return body


def _retryable(resp: httpx.Response | None) -> bool:
    return resp is None or resp.status_code >= 500 or resp.status_code == 429


def _result(resp: httpx.Response, what: str) -> dict[str, Any]:
    if resp.status_code >= 400:
        try:
            detail = resp.json().get("detail")
        except ValueError:
            detail = resp.text[:300]
        raise LedgerClientError(f"{what}: HTTP {resp.status_code}: {detail}")
    body: dict[str, Any] = resp.json()
    return body


class _Run(Generic[HttpT, TransportT]):
    """What both clients keep of one run: its opening, its outbox and its id."""

    def __init__(
        self,
        base_url: str,
        *,
        job: str,
        window_start: datetime,
        window_end: datetime,
        input_rows: int,
        token: str | None = None,
        timeout: float = 10.0,
        batch_size: int = 1000,
        client_run_id: str | None = None,
        backfill_id: int | None = None,
        transport: TransportT | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http: HttpT = self._client_type(
            base_url=base_url.rstrip("/") + "/api/v1/ledger",
            headers=headers,
            timeout=timeout,
            transport=transport,
        )
        self._backfill = (
            None
            if backfill_id is None
            else f"{base_url.rstrip('/')}/api/v1/backfills/{backfill_id}/runs"
        )
        self.input_rows = input_rows
        self._open = _open_body(
            job, window_start, window_end, input_rows, client_run_id or uuid.uuid4().hex
        )
        self._out = _Outbox(self._open["client_run_id"], batch_size)
        self.run_id: int | None = None
        self.closed = False

    _client_type: Callable[..., HttpT]
    """The HTTP client class the run's requests go through (async or not)."""

    @property
    def tally(self) -> Counts:
        """Return the outcomes reported so far."""
        return self._out.tally


class LedgerClient(_Run[httpx.AsyncClient, httpx.AsyncBaseTransport]):
    """One sync-job run reported to the ledger (async context manager)."""

    _client_type = httpx.AsyncClient

    async def __aenter__(self) -> LedgerClient:
        try:
            run = await self._post("/runs", self._open, "open the run")
            self.run_id = int(run["id"])
            if self._backfill is not None:
                await self._post(
                    self._backfill,
                    {"ledger_run_id": self.run_id},
                    "report the run under its backfill",
                )
        except BaseException:
            await self._http.aclose()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc is None:
                if not self.closed:
                    await self.close()
            else:
                # Keep what was done on record, but no summary: the run must stay open.
                with suppress(LedgerClientError):
                    await self.flush()
        finally:
            await self._http.aclose()

    async def written(self, keys: Iterable[str]) -> None:
        """Report keys written to the derived store."""
        self._out.add_keys("written", list(keys))
        await self._maybe_flush()

    async def no_match(self, reasons: Mapping[str, str]) -> None:
        """Report keys that matched no target document, each with its reason."""
        self._out.add_keys("no_match", reasons)
        await self._maybe_flush()

    async def skipped(self, reasons: Mapping[str, str]) -> None:
        """Report keys skipped on purpose, each with its reason."""
        self._out.add_keys("skipped", reasons)
        await self._maybe_flush()

    async def failed(self, errors: Mapping[str, str]) -> None:
        """Report keys whose write failed, each with its error class."""
        self._out.add_keys("failed", errors)
        await self._maybe_flush()

    async def count(self, outcome: Outcome, count: int, why: str | None = None) -> None:
        """Report rows by count when there are too many keys to list."""
        self._out.add_count(outcome, count, why)
        await self._maybe_flush()

    async def _maybe_flush(self) -> None:
        if self._out.full():
            await self.flush()

    async def flush(self) -> None:
        """Send every buffered outcome now."""
        while (batch := self._out.take()) is not None:
            await self._post(f"/runs/{self.run_id}/batches", batch, "report a batch")

    async def close(self, status: RunStatus | None = None, message: str | None = None) -> None:
        """Flush and close the run with a summary (status computed from the outcomes if None)."""
        await self.flush()
        await self._post(
            f"/runs/{self.run_id}/close",
            _summary(self._out.tally, self.input_rows, status, message),
            "close the run",
        )
        self.closed = True

    async def _post(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        resp: httpx.Response | None = None
        for delay in (*RETRY_DELAYS, None):
            try:
                resp = await self._http.post(path, json=body)
            except httpx.TransportError as exc:
                resp = None
                error = exc
            if not _retryable(resp) or delay is None:
                break
            await asyncio.sleep(delay)
        if resp is None:
            raise LedgerClientError(f"{what}: the ledger cannot be reached ({error!r})")
        return _result(resp, what)


class SyncLedgerClient(_Run[httpx.Client, httpx.BaseTransport]):
    """One sync-job run reported to the ledger (context manager, no event loop needed)."""

    _client_type = httpx.Client

    def __enter__(self) -> SyncLedgerClient:
        try:
            self.run_id = int(self._post("/runs", self._open, "open the run")["id"])
            if self._backfill is not None:
                self._post(
                    self._backfill,
                    {"ledger_run_id": self.run_id},
                    "report the run under its backfill",
                )
        except BaseException:
            self._http.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc is None:
                if not self.closed:
                    self.close()
            else:
                # Keep what was done on record, but no summary: the run must stay open.
                with suppress(LedgerClientError):
                    self.flush()
        finally:
            self._http.close()

    def written(self, keys: Iterable[str]) -> None:
        """Report keys written to the derived store."""
        self._out.add_keys("written", list(keys))
        self._maybe_flush()

    def no_match(self, reasons: Mapping[str, str]) -> None:
        """Report keys that matched no target document, each with its reason."""
        self._out.add_keys("no_match", reasons)
        self._maybe_flush()

    def skipped(self, reasons: Mapping[str, str]) -> None:
        """Report keys skipped on purpose, each with its reason."""
        self._out.add_keys("skipped", reasons)
        self._maybe_flush()

    def failed(self, errors: Mapping[str, str]) -> None:
        """Report keys whose write failed, each with its error class."""
        self._out.add_keys("failed", errors)
        self._maybe_flush()

    def count(self, outcome: Outcome, count: int, why: str | None = None) -> None:
        """Report rows by count when there are too many keys to list."""
        self._out.add_count(outcome, count, why)
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self._out.full():
            self.flush()

    def flush(self) -> None:
        """Send every buffered outcome now."""
        while (batch := self._out.take()) is not None:
            self._post(f"/runs/{self.run_id}/batches", batch, "report a batch")

    def close(self, status: RunStatus | None = None, message: str | None = None) -> None:
        """Flush and close the run with a summary (status computed from the outcomes if None)."""
        self.flush()
        self._post(
            f"/runs/{self.run_id}/close",
            _summary(self._out.tally, self.input_rows, status, message),
            "close the run",
        )
        self.closed = True

    def _post(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        resp: httpx.Response | None = None
        for delay in (*RETRY_DELAYS, None):
            try:
                resp = self._http.post(path, json=body)
            except httpx.TransportError as exc:
                resp = None
                error = exc
            if not _retryable(resp) or delay is None:
                break
            time.sleep(delay)
        if resp is None:
            raise LedgerClientError(f"{what}: the ledger cannot be reached ({error!r})")
        return _result(resp, what)
