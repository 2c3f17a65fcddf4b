"""The reader API adapter: rows shipped page by page, hashed here, aggregated in Python.

No pushdown is possible through an application's API, so each window is fetched once per
run, every row is hashed with the canonical encoding, and the aggregates come from the
same code as the in-memory adapter's (stores.memory), bucket for bucket.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Self

import httpx

from driftgauge.config.frozen import View
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.clock import EPOCH
from driftgauge.core.errors import StoreQueryError
from driftgauge.core.fields import TimestampPrecision
from driftgauge.encoding import digest as d
from driftgauge.stores.backoff import DEFAULT_POLICY, RetryPolicy
from driftgauge.stores.base import (
    BucketDigest,
    Granularity,
    ReadAdapter,
    RowHash,
    SlotPass,
    Spans,
    no_prefixes,
)
from driftgauge.stores.memory import MemoryAdapter
from driftgauge.stores.reader_api import io
from driftgauge.stores.reader_api.paths import MISSING, lookup
from driftgauge.stores.reader_api.settings import ReaderApiStore


class ReaderApiAdapter(ReadAdapter):
    """Read a reader view through the application's own HTTP API (reader side only)."""

    def __init__(self, view: View, client: httpx.AsyncClient, *, owns_client: bool) -> None:
        if not isinstance(view.store, ReaderApiStore):
            raise ValueError("a reader_api view needs a reader_api store")
        if view.exclusions:
            raise ValueError("a reader_api view is a reader: it has no exclusions")
        self.view = view
        self.store: ReaderApiStore = view.store
        self._client = client
        self._owns_client = owns_client
        self._pace = io.Pace(self.store.rate_limit)
        self._windows: list[tuple[datetime, datetime, MemoryAdapter]] = []
        self._read = 0
        self.requests = 0
        self.mode = self.store.mode
        self.retry: RetryPolicy = DEFAULT_POLICY
        """How a failed page read is tried again (tests shorten it)."""

    @classmethod
    async def open(cls, view: View, client: httpx.AsyncClient | None = None) -> Self:
        """Return an adapter on the store's shared client, or on a client of its own."""
        store = view.store
        if not isinstance(store, ReaderApiStore):
            raise ValueError("a reader_api view needs a reader_api store")
        return cls(view, client or io.open_client(store), owns_client=client is None)

    async def close(self) -> None:
        """Close the client, unless the store's other views share it."""
        if self._owns_client:
            await self._client.aclose()

    async def _window(self, start: datetime, end: datetime) -> MemoryAdapter:
        """Return the rows of a window that covers [start, end), fetching it if none does."""
        for lo, hi, rows in self._windows:
            if lo <= start and end <= hi:
                return rows
        # An hour more: a window of local days grows by one where the zone falls back.
        limit = timedelta(days=self.store.max_window_days, hours=1)
        if end - start > limit:
            raise StoreQueryError(
                self.store.name,
                (
                    f"the window {io.iso(start)} to {io.iso(end)} is longer than "
                    f"max_window_days={self.store.max_window_days}: a reader API is checked on a "
                    "bounded recent window (shorten the schedule's days or raise the setting)"
                ),
            )
        got: list[RowHash] = []
        first = True
        pages = io.pages(self._client, self.store, start, end, self._pace, self.retry)
        async for where, page in pages:
            self.requests += 1
            if first:
                self._preflight(page)
                first = False
            self._read += len(page)
            if self._read > self.store.max_rows:
                raise StoreQueryError(
                    self.store.name,
                    (
                        f"more than max_rows={self.store.max_rows} rows in this run (at "
                        f"{self._read} after page {self.requests}); raise max_rows or shorten "
                        "the window"
                    ),
                )
            hashed = (self._hash(row, where, i) for i, row in enumerate(page))
            got.extend(r for r in hashed if start <= r.event_time < end)
        rows = MemoryAdapter(got, self.view.timezone, measures=self.view.measures)
        self._windows.append((start, end, rows))
        return rows

    def _paths(self) -> list[str]:
        return [*self.view.key_columns, self.view.time_column, *self.view.columns]

    def _preflight(self, page: list[Any]) -> None:
        """Refuse a first page whose rows lack a mapped field (its path named)."""
        if not page:
            return
        for path in self._paths():
            if all(not isinstance(r, dict) or lookup(r, path) is MISSING for r in page):
                raise StoreQueryError(
                    self.store.name,
                    (
                        f"field path {path!r} is in none of the first page's {len(page)} rows "
                        f"at rows_path {self.store.rows_path or '(the body)'!r}"
                    ),
                )

    def _hash(self, row: Any, where: str, index: int) -> RowHash:
        """Return one served row hashed; `where` and `index` name it in an error."""
        view = self.view
        if not isinstance(row, dict):
            raise StoreQueryError(
                self.store.name,
                f"{where}, row {index}: a row is {type(row).__name__}, not an object",
            )
        for column in view.key_columns:
            # An absent key is not a NULL key: counting the row as an extra NULL would hide
            # an API that drops a field (or a mapping that names the wrong one).
            if lookup(row, column) is MISSING:
                raise StoreQueryError(
                    self.store.name,
                    f"{where}, row {index}: the row has no key field {column!r}",
                )
        # A reader's row with a NULL key part is kept: its part encodes as N, and it is extra.
        key: d.Key = (
            tuple(_value(row, c) for c in view.key_columns)
            if view.composite
            else _value(row, view.key_column)
        )
        key_type: d.KeyTypes = view.key_types if view.composite else view.key_type
        try:
            when = _instant(_value(row, view.time_column))
            values = [_value(row, c) for c in view.columns]
            types = [f.type for f in view.fields]
            khash, rhash = d.hash_row(key, key_type, values, types, view.timestamp_precision)
            text = None if key is None else d.key_text(key)
            given = {
                name: _measure(_value(row, column))
                for name, column in zip(view.measures, view.measure_columns, strict=True)
            }
            totals = {name: v for name, v in given.items() if v is not None}  # NULL adds 0
        except (TypeError, ValueError) as exc:
            raise StoreQueryError(
                self.store.name, f"{where}, row {index} (key {key!r}): {exc}"
            ) from None
        return RowHash(text, khash, rhash, when, totals or None)

    def use_timestamp_precision(self, precision: TimestampPrecision) -> None:
        """Hash timestamp fields at `precision` from the next fetch on."""
        if precision != self.view.timestamp_precision:
            self.view = replace(self.view, timestamp_precision=precision)
            self._windows = []

    async def bucket_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        """Return per-bucket aggregates of the rows the API returned."""
        # Hours too from the window's rows: one fetch, not one per run of hours.
        if start >= end:
            return []
        return await (await self._window(start, end)).bucket_digests(start, end, granularity)

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        """Return per-slot aggregates (slots of `seconds` from start)."""
        if start >= end:
            return []
        return await (await self._window(start, end)).slot_digests(start, end, seconds)

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> SlotPass:
        """Return day buckets and their slots from one fetch of the window."""
        return await (await self._window(start, end)).day_and_slot_digests(start, end, seconds)

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        """Return aggregates grouped by the first `depth` hex digits of the key hash."""
        if no_prefixes(start, end, depth, within):
            return {}
        return await (await self._window(start, end)).prefix_digests(start, end, depth, within)

    async def _rows(
        self, start: datetime, end: datetime, prefixes: Sequence[str] | None, spans: Spans | None
    ) -> AsyncIterator[RowHash]:
        """Yield the rows the API returned in [start, end) (optionally filtered)."""
        rows = await self._window(start, end)
        async for r in rows.iter_rows(start, end, prefixes, ranges=spans):
            yield r


def _value(row: dict[str, Any], path: str) -> Any:
    got = lookup(row, path)
    return None if got is MISSING else got  # an API leaves null fields out


def _measure(value: Any) -> Decimal | None:
    """Return a measure's exact value: a JSON number (read as a decimal), an integer or text."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str | Decimal):
        raise TypeError(f"measure value {value!r} is no number")
    number = Decimal(d.plain_decimal(value))
    if not number.is_finite():
        raise ValueError(f"measure value {value!r} is not a finite number")
    return number


def _instant(value: Any) -> datetime:
    """Return the event time of a row: ISO 8601 text (UTC when zoneless) or epoch millis."""
    if isinstance(value, str):
        return d.iso_instant(value, "time ")
    if isinstance(value, int) and not isinstance(value, bool):
        return EPOCH + timedelta(milliseconds=value)
    raise ValueError(f"time {value!r} is no ISO 8601 text or epoch milliseconds")
