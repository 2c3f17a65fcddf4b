"""The OpenSearch adapter: digests computed in the cluster by one constant Painless script."""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Self, TypeVar

from driftgauge.config.frozen import View
from driftgauge.core.aggregate import Aggregate
from driftgauge.core.errors import (
    IncompleteExport,
    StoreQueryError,
    StoreTimeout,
)
from driftgauge.core.fields import TimestampPrecision
from driftgauge.encoding import iblt
from driftgauge.encoding.digest import exported_key, from_epoch_micros
from driftgauge.stores.base import (
    BucketDigest,
    DigestPass,
    Granularity,
    LazySlots,
    ReadAdapter,
    RowHash,
    SlotPass,
    Spans,
    TimeRanges,
    check_slot,
    no_prefixes,
)
from driftgauge.stores.opensearch import preflight as preflight_os
from driftgauge.stores.opensearch import requests as rq
from driftgauge.stores.opensearch import retry as os_retry
from driftgauge.stores.opensearch.client import (
    OPENSEARCH,
    Engine,
    cause,
    open_client,
    translate_error,
)
from driftgauge.stores.opensearch.settings import OpenSearchStore
from driftgauge.stores.preflight import FieldSchema

T = TypeVar("T")
PIT_KEEP_ALIVE = "2m"
MAX_PAGE = 10_000
"""index.max_result_window: no page, and so no single key's copies, may exceed it."""


SPANS_PER_QUERY = 500
"""Time spans of a row export per query, well under the default limit of 1,024 clauses."""


def _slices(spans: Spans, size: int) -> list[Spans]:
    """Return `spans` cut into consecutive lists of at most `size`."""
    return [spans[i : i + size] for i in range(0, len(spans), size)]


def to_millis(spans: Spans) -> Spans:
    """Return the spans widened to whole milliseconds (each start floored, each end ceiled)."""
    out: Spans = []
    for lo, hi in spans:
        lo -= timedelta(microseconds=lo.microsecond % 1000)
        if hi.microsecond % 1000:
            hi += timedelta(microseconds=1000 - hi.microsecond % 1000)
        if out and lo <= out[-1][1]:
            lo = out.pop()[0]  # spans in one millisecond: ask for it once
        out.append((lo, hi))
    return out


def _within(moment: datetime, spans: Spans) -> bool:
    """Return whether a moment lies in one of the sorted, disjoint spans."""
    i = bisect.bisect_right(spans, moment, key=lambda s: s[0]) - 1
    return i >= 0 and moment < spans[i][1]


class OpenSearchAdapter(ReadAdapter):
    """Read a reader view (index + the reader's filter) or an OpenSearch source."""

    widest_digest = iblt.DAY_WIDTH
    """A day scanned again may be this wide: a shard's day holds K * width cells (6 MB)."""

    def __init__(
        self,
        view: View,
        client: Any,
        *,
        page_size: int = 1000,
        max_chunk_rows: int = 200_000,
        retry: os_retry.RetryPolicy = os_retry.DEFAULT_POLICY,
        owns_client: bool = True,
        engine: Engine = OPENSEARCH,
    ) -> None:
        if not isinstance(view.store, OpenSearchStore) or not view.index:
            raise ValueError("an opensearch view needs an opensearch store and an index")
        self.view = view
        self.store = view.store
        self._client = client
        self.page_size = page_size
        self.max_chunk_rows = max_chunk_rows
        self.retry = retry
        self._owns_client = owns_client
        self.engine = engine

    @classmethod
    async def open(cls, view: View, client: Any = None, engine: Engine = OPENSEARCH) -> Self:
        """Return an adapter on the store's shared client, or on a client of its own."""
        if not isinstance(view.store, OpenSearchStore):
            raise ValueError("an opensearch view needs an opensearch store")
        if client is not None:
            return cls(view, client, owns_client=False, engine=engine)
        return cls(view, open_client(view.store), engine=engine)

    async def inspect_fields(self) -> list[FieldSchema]:
        """Return each configured field as every concrete index maps it (the preflight's view)."""
        return await preflight_os.describe(self.view, self._client, self._call)

    def use_timestamp_precision(self, precision: TimestampPrecision) -> None:
        """Hash timestamp fields at `precision` from the next request on."""
        self.view = replace(self.view, timestamp_precision=precision)

    async def close(self) -> None:
        """Close the HTTP client, unless the store's other views share it."""
        if self._owns_client:
            await self._client.close()

    async def _day_counts(self, start: datetime, end: datetime) -> rq.DayCounts:
        """Return the window's doc count per day, to cut its requests into chunks."""
        body = rq.day_counts_body(self.view, start, end)
        counts = rq.parse_day_counts(await self._search("count rows per day", body))
        return rq.DayCounts(start, end, counts)

    async def _day_digests(
        self, start: datetime, end: datetime, granularity: Granularity
    ) -> list[BucketDigest]:
        """Return day buckets, asking in chunks of whole days of bounded size."""
        # Hours come from slots (ReadAdapter): calendar hours round a half-hour shift into a
        # 90-minute hour.
        counted = await self._day_counts(start, end)
        if not counted.counts:
            return []
        out: list[BucketDigest] = []
        for chunk in rq.plan_chunks(counted, self.max_chunk_rows, rq.MAX_BUCKETS_PER_REQUEST):
            resp = await self._search(
                "bucket digests", rq.bucket_body(self.view, chunk.start, chunk.end, granularity)
            )
            out.extend(self._parsed(rq.parse_buckets, resp, self.view))
        return sorted(out, key=lambda b: b.start)

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> list[BucketDigest]:
        """Return per-slot aggregates aligned on start, in chunks cut on slot bounds.

        Keys are always counted here (`distinct` is a hint this adapter does not need).
        """
        check_slot(start, seconds)
        if start >= end:
            return []
        counted = await self._day_counts(start, end)
        if not counted.counts:
            return []
        out: list[BucketDigest] = []
        for chunk in rq.plan_slot_chunks(counted, self.max_chunk_rows, seconds):
            resp = await self._search(
                "slot digests", rq.slot_body(self.view, chunk.start, chunk.end, seconds, start)
            )
            out.extend(self._parsed(rq.parse_buckets, resp, self.view))
        return sorted(out, key=lambda b: b.start)

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> SlotPass:
        """Return day buckets and their slots from one pass of scripted metrics."""
        check_slot(start, seconds)
        if start >= end:
            return SlotPass([], {})
        counted = await self._day_counts(start, end)
        if not counted.counts:
            return SlotPass([], {})
        days: list[BucketDigest] = []
        raw: dict[datetime, Any] = {}
        for chunk in rq.plan_chunks(counted, self.max_chunk_rows, rq.MAX_BUCKETS_PER_REQUEST):
            resp = await self._search(
                "day and slot digests",
                rq.day_slot_body(self.view, chunk.start, chunk.end, seconds, start),
            )
            got, slots = self._parsed(rq.parse_day_slots, resp, self.view)
            days.extend(got)
            raw.update(slots)

        def build(day_raw: Any) -> list[BucketDigest]:
            return self._parsed(rq.slots_from, day_raw, start, seconds)

        return SlotPass(sorted(days, key=lambda b: b.start), LazySlots(raw, build))

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> DigestPass:
        """Return day buckets and each day's difference digest from one pass of scripts."""
        if not 1 <= width <= self.widest_digest:
            raise ValueError(f"width must be between 1 and {self.widest_digest}, got {width}")
        if start >= end:
            return DigestPass([], {})
        counted = await self._day_counts(start, end)
        if width > iblt.MAX_WIDTH and len(counted.counts) > 1:
            # Each day bucket of each shard holds a flat array of K * width cells.
            raise ValueError(
                f"a table wider than {iblt.MAX_WIDTH} cells is built for one day at a time,"
                f" not for {len(counted.counts)} days"
            )
        days: list[BucketDigest] = []
        tables: dict[datetime, dict[int, iblt.Cell]] = {}
        for chunk in rq.plan_chunks(counted, self.max_chunk_rows, rq.MAX_BUCKETS_PER_REQUEST):
            resp = await self._search(
                "day and cell digests", rq.day_cell_body(self.view, chunk.start, chunk.end, width)
            )
            got, raw = self._parsed(rq.parse_day_slots, resp, self.view)
            days.extend(got)
            for day, cells in raw.items():
                tables[day] = self._parsed(rq.cells_from, cells)
        return DigestPass(sorted(days, key=lambda b: b.start), tables)

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> dict[str, Aggregate]:
        """Return aggregates by key-hash prefix in one request."""
        if no_prefixes(start, end, depth, within):
            return {}
        resp = await self._search(
            "prefix digests", rq.prefix_body(self.view, start, end, depth, within)
        )
        return self._parsed(rq.parse_prefixes, resp)

    async def _rows(
        self, start: datetime, end: datetime, prefixes: Sequence[str] | None, spans: Spans | None
    ) -> AsyncIterator[RowHash]:
        """Yield expected rows from a point in time, paging with search_after on the key."""
        # A partial PIT would silently lack the rows of its failed shards: refuse it, and
        # check the answer too where it reports _shards; every page's _shards is checked.
        index = str(self.view.index)
        pit = await self._call(
            "open a point in time",
            lambda: self.engine.open_pit(self._client, index, PIT_KEEP_ALIVE),
        )
        pit_id = self._parsed(self.engine.pit_id, pit)
        try:
            if self.engine.pit_open_reports_shards:
                self._complete("open a point in time", pit)
            # One query may hold at most 1,024 clauses (indices.query.bool.max_clause_count):
            # a long list of spans is read a slice at a time; the spans are disjoint.
            if spans is None:
                async for row in self._pages(pit_id, start, end, prefixes, None):
                    yield row
                return
            for part in _slices(spans, SPANS_PER_QUERY):
                # Asked in whole milliseconds: a `date` field keeps milliseconds and rounds
                # a sub-millisecond bound to one, so a one-microsecond span would match
                # nothing. The rows are then held to the spans asked for.
                async for row in self._pages(pit_id, start, end, prefixes, to_millis(part)):
                    if _within(row.event_time, part):
                        yield row
        finally:
            await self._delete_pit(pit_id)

    async def _pages(
        self,
        pit_id: str,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None,
        ranges: TimeRanges | None = None,
    ) -> AsyncIterator[RowHash]:
        # Duplicated keys tie on the sort, and 2.x has no _shard_doc tiebreaker (sorting
        # on _id loads deprecated fielddata), so a page is only ever cut between two
        # keys: the trailing key is re-read whole on the next page.
        size = self.page_size
        after: list[Any] | None = None
        total: int | None = None
        received = 0
        while True:
            body = rq.rows_body(self.view, start, end, prefixes, size=size, ranges=ranges)
            body["pit"] = {"id": pit_id, "keep_alive": PIT_KEEP_ALIVE}
            body["track_total_hits"] = total is None
            if after is not None:
                body["search_after"] = after
            resp = await self._search("export rows", body, with_index=False)
            pit_id = str(resp.get("pit_id", pit_id))
            if total is None:
                total = self._parsed(_exact_total, resp)
            hits: list[dict[str, Any]] = self._parsed(lambda r: list(r["hits"]["hits"]), resp)
            last_page = len(hits) < size
            if not last_page:
                tail = hits[-1].get("sort")
                hits = [h for h in hits if h.get("sort") != tail]
                if not hits:
                    if size >= MAX_PAGE:
                        raise IncompleteExport(
                            self.store.name,
                            (
                                f"index {self.view.index}: key sort value {tail!r} has more "
                                f"than {MAX_PAGE} copies; cannot page past it"
                            ),
                        )
                    size = min(size * 2, MAX_PAGE)
                    continue
            for hit in hits:
                received += 1
                yield self._parsed(_row, hit, self.view.composite)
            if last_page:
                break
            after = hits[-1]["sort"]
        if received != total:
            raise IncompleteExport(
                self.store.name,
                (
                    f"index {self.view.index}: point in time holds {total} rows, "
                    f"export received {received}"
                ),
            )

    async def _delete_pit(self, pit_id: str) -> None:
        # The PIT expires by itself; a failed delete must not hide the real outcome.
        try:
            await self.engine.close_pit(self._client, pit_id)
        except Exception as exc:
            if translate_error(self.store.name, "delete the point in time", exc) is None:
                raise

    async def _search(
        self, what: str, body: dict[str, Any], *, with_index: bool = True
    ) -> dict[str, Any]:
        params = {"allow_partial_search_results": "false"}
        index = {"index": self.view.index} if with_index else {}
        resp: dict[str, Any] = await self._call(
            what, lambda: self._client.search(body=body, params=params, **index)
        )
        self._complete(what, resp)
        return resp

    def _complete(self, what: str, resp: dict[str, Any]) -> None:
        """Raise unless every shard answered: failures arrive as HTTP 200 with _shards."""
        # A partial answer would be a wrong digest, never a smaller one to accept.
        if resp.get("timed_out"):
            raise StoreTimeout(
                self.store.name,
                f"{what} on index {self.view.index}: shards timed out (partial result refused)",
            )
        shards = resp.get("_shards")
        if not isinstance(shards, dict):
            raise StoreQueryError(
                self.store.name,
                (
                    f"{what} on index {self.view.index}: the answer has no _shards "
                    "(cannot tell whether every shard answered)"
                ),
            )
        failures = shards.get("failures") or []
        try:
            total = int(shards.get("total", 0))
            answered = int(shards.get("successful", 0)) + int(shards.get("skipped", 0))
            failed = max(int(shards.get("failed", 0)), len(failures), total - answered)
        except (TypeError, ValueError) as exc:
            raise StoreQueryError(
                self.store.name, (f"{what} on index {self.view.index}: unreadable _shards ({exc})")
            ) from exc
        if failed > 0:
            first = failures[0] if failures and isinstance(failures[0], dict) else {}
            kind, reason = cause({"error": first.get("reason")})
            raise StoreQueryError(
                self.store.name,
                (
                    f"{what} on index {self.view.index}: {failed} of {total} shards failed "
                    f"({kind}: {reason}); partial answer refused"
                ),
            )

    async def _call(self, what: str, make: Callable[[], Awaitable[Any]]) -> Any:
        """Make a read (`make` makes the request afresh) through the retry layer."""
        return await os_retry.call(
            make,
            store=self.store.name,
            what=f"{what} on index {self.view.index}",
            translate=translate_error,
            policy=self.retry,
        )

    def _parsed(self, parse: Callable[..., T], *args: Any) -> T:
        try:
            return parse(*args)
        except (rq.ResponseError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise StoreQueryError(
                self.store.name, (f"index {self.view.index}: unexpected response ({exc})")
            ) from exc


def _exact_total(resp: dict[str, Any]) -> int:
    total = resp["hits"]["total"]
    if total.get("relation") != "eq":
        raise rq.ResponseError(f"hits.total is a lower bound ({total})")
    return int(total["value"])


def _row(hit: dict[str, Any], composite: bool) -> RowHash:
    value = hit["fields"]["r"][0]
    micros = value.get("time")
    if micros is None:
        raise rq.ResponseError(f"document {hit.get('_id')} has no event time")
    key = value.get("key")  # null for a NULL key, which is not the key ""
    return RowHash(
        key=exported_key(None if key is None else str(key), composite),
        key_hash=str(value["key_hash"]),
        row_hash=int(value["row_hash"]),
        event_time=from_epoch_micros(int(micros)),
    )
