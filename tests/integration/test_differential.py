"""driftgauge on real stores says what a plain-Python full outer join says, on random data.

Hypothesis generates data sets (separator, emoji and NFC/NFD keys, NULLs, empty strings,
int64 extremes, times on DST changes in four zones, duplicates) and drift (missing,
extra, mismatched, duplicated and moved rows), loads them into PostgreSQL (and
OpenSearch), and compares every day bucket of driftgauge's run with tests.oracle.
Drill-down settings vary so that small days are fetched whole and larger ones go
through slots, hours and key-hash prefixes.

`make test` runs the bounded, derandomized `ci` profile; `make test-differential`
runs HYPOTHESIS_PROFILE=long.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from itertools import count
from typing import Any

import asyncpg
import pytest
from hypothesis import (
    HealthCheck,
    Phase,
    assume,
    currently_in_test_context,
    event,
    given,
    settings,
)
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.config.frozen import (
    Check,
    Drilldown,
    Exclusion,
    Field,
    Tolerance,
    View,
)
from driftgauge.engine.plan import StoredDrift
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import RunResult
from driftgauge.engine.strategy import FirstPass
from driftgauge.jobs.first_pass import drift_of
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.preflight import preflight
from tests import oracle
from tests.integration import differential_strategies as gen
from tests.integration.conftest import OS_URL, TIMEOUT, os_store, pg_store, unique_name
from tests.integration.differential_support import (
    HIDDEN,
    Case,
    Pair,
    Row,
    Settings,
    describe,
    oracle_limits,
    oracle_sides,
    os_actions,
    os_mapping,
    pg_ddl,
    pg_records,
    reader_copy,
)

pytestmark = pytest.mark.integration

_COMMON: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "print_blob": True,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
}
# CI: the same examples every run, and a failure reported at once (no shrinking).
settings.register_profile(
    "differential-ci",
    max_examples=10,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    **_COMMON,
)
settings.register_profile("differential-long", max_examples=250, **_COMMON)
# Local minimising: the CI examples, shrunk when one fails.
settings.register_profile("differential-dev", max_examples=10, derandomize=True, **_COMMON)
# Cases that hit a known, reported bug whose fix is not on main yet: skipped (and counted
# as an event) so the test keeps guarding everything else. DIFFERENTIAL_KNOWN_BUGS=run
# runs them too, to check a fix.
KNOWN_BUGS: dict[str, Callable[[Case], bool]] = {}
RUN_KNOWN = os.environ.get("DIFFERENTIAL_KNOWN_BUGS") == "run"
_NAME = os.environ.get("HYPOTHESIS_PROFILE", "ci")
PROFILE = settings.get_profile(f"differential-{_NAME if _NAME in ('long', 'dev') else 'ci'}")
FIELDS = (Field("label", "string"), Field("qty", "integer"), Field("seen", "timestamp"))
_serial = count()


class Traced:
    """Pass every call to a real adapter, noting which drill-down path asked for what."""

    def __init__(self, inner: StoreAdapter, paths: set[str]) -> None:
        self.inner = inner
        self.paths = paths

    async def bucket_digests(self, start: datetime, end: datetime, granularity: Any) -> Any:
        if granularity == "hour":
            self.paths.add("hours")
        return await self.inner.bucket_digests(start, end, granularity)

    async def day_and_slot_digests(self, start: datetime, end: datetime, seconds: int) -> Any:
        self.paths.add("first-pass slots")
        return await self.inner.day_and_slot_digests(start, end, seconds)  # type: ignore[attr-defined]

    async def day_and_cell_digests(self, start: datetime, end: datetime, width: int) -> Any:
        span = end - start
        # A range of days (a first pass, or a second pass over the differing days), one
        # day scanned alone, or the hours of a day.
        kind = "days" if span > timedelta(hours=26) else "day"
        self.paths.add(f"{kind} digests" if span >= timedelta(hours=20) else "hours digests")
        return await self.inner.day_and_cell_digests(start, end, width)  # type: ignore[attr-defined]

    async def slot_digests(
        self, start: datetime, end: datetime, seconds: int, *, distinct: bool = True
    ) -> Any:
        self.paths.add("slot query")
        return await self.inner.slot_digests(start, end, seconds, distinct=distinct)

    async def prefix_digests(
        self, start: datetime, end: datetime, depth: int, within: Sequence[str] | None = None
    ) -> Any:
        self.paths.add("prefixes")
        return await self.inner.prefix_digests(start, end, depth, within)

    def iter_rows(
        self,
        start: datetime,
        end: datetime,
        prefixes: Sequence[str] | None = None,
        *,
        ranges: Any = None,
    ) -> Any:
        if ranges is not None:
            self.paths.add("slot rows")
        elif prefixes is not None:
            self.paths.add("prefix rows")
        else:
            self.paths.add("whole day rows" if end - start > timedelta(hours=2) else "range rows")
        return self.inner.iter_rows(start, end, prefixes, ranges=ranges)

    async def close(self) -> None:
        await self.inner.close()


def build_check(case: Case, source: View, reader: View) -> Check:
    """Return the check with the case's settle, tolerances and drill-down settings."""
    s = case.settings
    rate = () if s.exclusion_rate is None else (("no_join_key", s.exclusion_rate),)
    return Check(
        name="diff",
        source=source,
        reader=reader,
        fields=FIELDS,
        key_type=case.key_type,
        timezone=case.tz,
        settle=timedelta(hours=s.settle_hours),
        tolerance=Tolerance(s.missing_ratio, s.extra, s.mismatched, rate),
        drilldown=Drilldown(
            leaf_rows=s.leaf_rows,
            dense_ratio=s.dense_ratio,
            max_depth=s.max_depth,
            slot_first_pass_days=s.slot_first_pass_days,
        ),
    )


def view(case: Case, store: Any, **where: Any) -> View:
    """Return one side's view over columns k, label, qty, seen and time ts."""
    return View(
        store=store,
        key_column="k",
        time_column="ts",
        columns=("label", "qty", "seen"),
        fields=FIELDS,
        key_type=case.key_type,
        timezone=case.tz,
        **where,
    )


async def run_driftgauge(
    case: Case, dsn: str, client: AsyncOpenSearch
) -> tuple[dict[Any, tuple[Any, ...]], str | None, set[str]]:
    """Load the case into fresh tables (and an index), reconcile, drop them; return buckets."""
    n = next(_serial)
    src_table, rdr_table = f"src_{n}", f"rdr_{n}"
    index = unique_name("dg_diff")
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        await conn.execute(pg_ddl(src_table, case.key_type))
        await conn.copy_records_to_table(src_table, records=pg_records(case.source))
        source = view(
            case,
            pg_store(dsn),
            table=src_table,
            exclusions=(Exclusion("no_join_key", where="ckey IS NULL"),),
        )
        if case.pair == "pg-pg":
            await conn.execute(pg_ddl(rdr_table, case.key_type))
            await conn.copy_records_to_table(rdr_table, records=pg_records(case.reader))
            reader = (
                view(case, pg_store(dsn), table=rdr_table)
                if not case.settings.reader_filter
                else view(
                    case,
                    pg_store(dsn),
                    query=f"SELECT * FROM \"{rdr_table}\" WHERE label IS DISTINCT FROM '{HIDDEN}'",
                )
            )
        else:
            await client.indices.create(
                index=index,
                body={
                    "settings": {"number_of_shards": case.settings.shards, "number_of_replicas": 0},
                    "mappings": os_mapping(case.key_type),
                },
            )
            await async_bulk(client, os_actions(index, case.reader), refresh=True)
            hide = {"bool": {"must_not": {"term": {"label": HIDDEN}}}}
            reader = view(
                case, os_store(), index=index, filter=hide if case.settings.reader_filter else None
            )
        if case.settings.parallel_scans > 1:
            parts = case.settings.parallel_scans
            # The stores are the kinds' frozen dataclasses behind the Store protocol.
            source = replace(source, store=replace(source.store, parallel_scans=parts))  # type: ignore[type-var]
            reader = replace(reader, store=replace(reader.store, parallel_scans=parts))  # type: ignore[type-var]
        check = build_check(case, source, reader)
        paths: set[str] = set()
        src = Traced(await open_adapter(check.source), paths)
        rdr = Traced(await open_adapter(check.reader), paths)
        start, end = case.window()

        async def run(first: FirstPass) -> RunResult:
            return await reconcile(check, src, rdr, start, end, now=case.now(), first=first)

        try:
            # As the runner does: refuse unreadable fields, settle the timestamp precision.
            await preflight(check, src.inner, rdr.inner)
            settings = case.settings
            result = await run(
                FirstPass(
                    slots=settings.slots_first,
                    width=settings.digest_width,
                    rescan=settings.days_first,
                )
            )
            if settings.rescan and result.error is None:
                result = await run(FirstPass(rescan=True, day_drift=stored_drift(result)))
        finally:
            await src.close()
            await rdr.close()
    finally:
        await conn.execute(f'DROP TABLE IF EXISTS "{src_table}", "{rdr_table}"')
        await conn.close()
        if case.pair == "pg-os":
            await client.indices.delete(index=index, ignore_unavailable=True)
    got: dict[Any, tuple[Any, ...]] = {
        b.start.date(): (
            b.expected,
            b.visible,
            dict(sorted(b.excluded.items())),
            b.missing,
            b.extra,
            b.mismatched,
            b.duplicates,
            b.status,
        )
        for b in result.buckets
    }
    got["run"] = (result.status,)
    return got, result.error, paths


def stored_drift(result: RunResult) -> dict[datetime, StoredDrift]:
    """Return what a run's drifted days would tell the next run's plan (jobs.first_pass)."""
    return {b.start.astimezone(UTC): drift_of(b) for b in result.buckets if b.status == "drift"}


async def assert_matches_oracle(case: Case, dsn: str, client: AsyncOpenSearch) -> set[str]:
    """Fail, naming each differing day and field, when driftgauge and the oracle disagree.

    Return the drill-down paths the run took.
    """
    for bug, hits in KNOWN_BUGS.items():
        if not RUN_KNOWN and hits(case):
            event(f"skipped, known bug: {bug}")
            assume(False)
    got, error, paths = await run_driftgauge(case, dsn, client)
    if currently_in_test_context():
        for p in sorted(paths):
            event(f"path: {p}")
    src, rdr = oracle_sides(case)
    start, end = case.window()
    days = oracle.reconcile(
        src,
        rdr,
        start,
        end,
        case.tz,
        oracle_limits(case.settings),
        settled_before=case.now() - timedelta(hours=case.settings.settle_hours),
    )
    want: dict[Any, tuple[Any, ...]] = {d: day.as_tuple() for d, day in days.items()}
    want["run"] = (oracle.run_status(days.values()),)
    assert error is None, f"run ended in error: {error}\n{describe(case)}"
    problems = []
    for d in sorted(want.keys() | got.keys(), key=str):
        w, g = want.get(d), got.get(d)
        if w != g:
            fields = (
                [
                    f"{f}: driftgauge {gv!r} oracle {wv!r}"
                    for f, gv, wv in zip(
                        oracle.FIELDS if d != "run" else ("status",), g, w, strict=True
                    )
                    if gv != wv
                ]
                if w and g
                else [f"driftgauge {g!r} oracle {w!r}"]
            )
            problems.append(f"{d}: " + "; ".join(fields))
    assert not problems, "\n".join(problems) + "\n" + describe(case)
    return paths


@pytest.fixture(scope="module")
async def stores(pg_database: str) -> AsyncIterator[tuple[str, AsyncOpenSearch]]:
    """Yield the module's database DSN and an OpenSearch client for loading."""
    client = AsyncOpenSearch(hosts=[OS_URL], timeout=TIMEOUT)
    try:
        yield pg_database, client
    finally:
        await client.close()


@settings(PROFILE)
@given(case=gen.cases("pg-pg"))
async def test_pg_to_pg_matches_oracle(stores: tuple[str, AsyncOpenSearch], case: Case) -> None:
    await assert_matches_oracle(case, *stores)


@settings(PROFILE)
@given(case=gen.cases("pg-os"))
async def test_pg_to_os_matches_oracle(stores: tuple[str, AsyncOpenSearch], case: Case) -> None:
    await assert_matches_oracle(case, *stores)


def _split_key_case(pair: Pair, name: str) -> tuple[Case, set[str]]:
    """Return a UTC case whose key has rows in two hours or slots of its day."""
    day = date(2026, 1, 1)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    case = Case(pair, "UTC", day, "string", [], [], Settings(leaf_rows=2))
    if name == "identical copies in two hours":
        # Found by the differential test: each hour held one copy per side and agreed,
        # so the day ended `ok`; the copies are one mismatched duplicate.
        case.source = [Row(f"k{i}", "a", i, at + timedelta(hours=i + 1)) for i in range(3)]
        case.source += [Row("dup", "d", 9, at + timedelta(hours=h)) for h in (10, 15)]
        case.reader = [reader_copy(r, pair) for r in case.source]
        return case, {"hours", "prefixes", "prefix rows"}
    # A row moved from a small slot into one too big to fetch: joined apart, it was
    # missing + extra; one join per day sees it unchanged.
    case.settings = Settings(leaf_rows=10, slot_first_pass_days=0)
    crowd = at + timedelta(hours=6, milliseconds=7)
    case.source = [Row(f"same{i}", "s", i, crowd) for i in range(40)]
    case.source += [
        Row(f"spread{i}", "p", i, at + timedelta(minutes=7 * i + 3)) for i in range(150)
    ]
    case.reader = [reader_copy(r, pair) for r in case.source]
    case.reader[40 + 100] = reader_copy(replace(case.source[40 + 100], ts=crowd), pair)
    case.reader[40 + 20] = replace(case.reader[40 + 20], label="changed")
    return case, {"slot query", "slot rows", "prefixes", "prefix rows"}


def _null_key_case(pair: Pair, name: str) -> tuple[Case, set[str]]:
    """Return a UTC case holding a NULL key and the key "", two different keys."""
    at = datetime(2026, 1, 1, 9, tzinfo=UTC)
    case = Case(pair, "UTC", date(2026, 1, 1), "string", [], [], Settings(leaf_rows=50))
    if name == "NULL key against the key ''":
        # Was one mismatched key: the join grouped rows by key text, "" for NULL too.
        case.source = [Row(None, "a", 1, at), Row("x", "a", 2, at)]
        case.reader = [reader_copy(Row("", "a", 1, at), pair), reader_copy(case.source[1], pair)]
    else:
        # Was a phantom duplicate: both keys on each side, one row each, one relabelled.
        case.source = [
            Row(None, "a", 1, at),
            Row("", "b", 2, at + timedelta(hours=1)),
            Row("x", "c", 3, at + timedelta(hours=2)),
        ]
        case.reader = [reader_copy(r, pair) for r in case.source]
        case.reader[2] = replace(case.reader[2], label="changed")
    return case, {"whole day rows"}


def _path_case(pair: Pair, name: str) -> tuple[Case, set[str]]:
    """Return a hand-made case that must take one drill-down path, and that path's calls."""
    if name in SPLIT_KEY_PATHS:
        return _split_key_case(pair, name)
    if name in NULL_KEY_PATHS:
        return _null_key_case(pair, name)
    # A spring-forward day (23 hours) for all but the case about the repeated hour.
    zone, day = (
        "Europe/Berlin",
        date(2026, 10 if "repeated hour" in name else 3, 25 if "repeated hour" in name else 29),
    )
    case = Case(pair, zone, day, "string", [], [], Settings(leaf_rows=10))
    if name in RESCAN_PATHS:
        # 12 days, 3 with rows: the first run peels (its hours known), the second scans.
        case.settings = Settings(leaf_rows=10, digest_width=64, rescan=True)
    start, end = case.window()
    mode = "instant" if name == "big slot → prefixes" else "spread"
    case.source = gen.filler(300, mode, "string", start, end)
    case.reader = [reader_copy(r, pair) for r in case.source]
    if name == "small day fetched whole":
        case.settings = Settings(leaf_rows=2000)
        del case.reader[5]
        return case, {"whole day rows"}
    if name in ("slots → rows", "first-pass slots → rows"):
        case.settings.slots_first = name.startswith("first")
        del case.reader[150]
        case.reader[40] = replace(case.reader[40], label="changed")
        want = {"first-pass slots" if case.settings.slots_first else "slot query", "slot rows"}
        return case, want
    if name == "stored drift → its hours scanned":
        del case.reader[150]  # two rows about an hour apart, in one day of the 12
        case.reader[151] = replace(case.reader[151], label="changed")
        return case, {"hours digests"}
    if name == "days first → second pass":
        # Nothing known: day aggregates, then one scan of the two differing days' digests.
        case.settings = Settings(leaf_rows=10, days_first=True)
        del case.reader[150]
        case.reader[40] = replace(case.reader[40], label="changed")
        case.reader.append(replace(case.reader[250], key="extra-one"))
        return case, {"days digests"}
    if name == "big slot → prefixes":
        del case.reader[7]
        return case, {"slot query", "prefixes", "prefix rows"}
    if name == "repeated key → hours":
        case.reader.append(case.reader[120])  # the same row twice: one hour differs
        return case, {"hours"}
    if name == "slot in the second repeated hour":
        # Found by the long run before buckets were keyed by their UTC start: a source row
        # at 02:08 CET (the second 02:00) that the reader lacked ended `ok`.
        case.source = gen.filler(1500, "spread", "string", start, end)
        case.reader = [reader_copy(r, pair) for r in case.source]
        case.settings = Settings(leaf_rows=1, max_depth=1, dense_ratio=0.05, slot_first_pass_days=0)
        case.source.append(Row("late", "l", 1, datetime(2026, 10, 25, 1, 8, tzinfo=UTC)))
        return case, {"slot query"}
    if name == "repeated key in the repeated hour":
        # 02:00–03:00 happens twice on 2026-10-25 in Berlin: 00:00–01:00 and 01:00–02:00 UTC.
        first = datetime(2026, 10, 25, 0, 20, tzinfo=UTC)  # 02:20 CEST
        twice = [Row(f"dst{i}", "d", i, first + timedelta(minutes=20 * i)) for i in range(5)]
        case.source += twice
        case.reader += [reader_copy(r, pair) for r in twice] + [reader_copy(twice[1], pair)]
        return case, {"hours"}
    # A repeated key in many hours: one prefix split over the whole day.
    case.reader += [case.reader[i] for i in range(100, 200, 7)]
    return case, {"hours", "prefixes", "prefix rows"}


SPLIT_KEY_PATHS = ("identical copies in two hours", "row moved into a slot split by prefix")
NULL_KEY_PATHS = ("NULL key against the key ''", "NULL key and the key '' in one day")
RESCAN_PATHS = ("stored drift → its hours scanned",)
PATHS = (
    "small day fetched whole",
    "slots → rows",
    "first-pass slots → rows",
    "days first → second pass",
    "big slot → prefixes",
    "repeated key → hours",
    "repeated key in the repeated hour",
    "slot in the second repeated hour",
    "repeated keys → day prefixes",
    *SPLIT_KEY_PATHS,
    *NULL_KEY_PATHS,
    *RESCAN_PATHS,
)


@pytest.mark.parametrize("pair", ["pg-pg", "pg-os"])
@pytest.mark.parametrize("name", PATHS)
async def test_each_drill_path_matches_oracle(
    stores: tuple[str, AsyncOpenSearch], pair: Pair, name: str
) -> None:
    case, want = _path_case(pair, name)
    for bug, hits in KNOWN_BUGS.items():
        if not RUN_KNOWN and hits(case):
            pytest.skip(f"known bug, fix not on main yet: {bug}")
    paths = await assert_matches_oracle(case, *stores)
    assert want <= paths, f"{name}: took {sorted(paths)}"
