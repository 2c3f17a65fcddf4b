"""REST endpoints under /api/v1: checks, day buckets, hours, prefixes, keys, runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, BeforeValidator

from driftgauge.api.models import (
    CheckOut,
    ChecksOut,
    DayOut,
    DaysOut,
    HourOut,
    KeysOut,
    RunsOut,
    ScheduleOut,
    TriggeredOut,
    TriggerOut,
    answers,
)
from driftgauge.api.opened import Runtime, runtime
from driftgauge.config.frozen import Check
from driftgauge.core import buckets
from driftgauge.core.bounds import day_problem, iso_day
from driftgauge.core.errors import StoreTimeout, UnknownCheck
from driftgauge.core.paging import Page
from driftgauge.engine.live import compare_hours, compare_prefixes
from driftgauge.engine.plan import next_day
from driftgauge.engine.result import Node, needs_drill
from driftgauge.jobs.schedule import job_specs
from driftgauge.jobs.schedule_metrics import TriggerFacts, trigger_facts
from driftgauge.routing import paged
from driftgauge.state.codec import StoredBucket
from driftgauge.state.payloads import CheckRun
from driftgauge.state.samples import KeyFilter
from driftgauge.stores import registry

router = APIRouter()
MAX_RANGE_DAYS = 3660
LIVE_DEADLINE = 30.0
# A client told to wait this long finds most live drill-downs done.
LIVE_RETRY_AFTER = 5

CheckName = Annotated[str, Path(description="The check's configured name.", max_length=63)]
Day = Annotated[
    date,
    BeforeValidator(iso_day),
    Path(description="The bucket's local date (YYYY-MM-DD, from 2000-01-01 to a year from now)."),
]
QueryDay = Annotated[date | None, BeforeValidator(iso_day)]
Hex = r"^[0-9a-f]{1,32}$"
LIVE_NEEDS = "(needs a bearer token; at most api.live_concurrency at once, else 429)"
HOUR_HELP = (
    "One hour bucket of the day: a local hour 0-23 where only one hour starts then; "
    "where the clocks repeat it, the local time with its offset (02:00+01:00) or "
    "the UTC start (2026-10-25T01:00:00Z)."
)


def _read(request: Request) -> Runtime:
    rt = runtime(request)
    rt.tokens.require_read(request)
    return rt


def _write(request: Request) -> Runtime:
    rt = runtime(request)
    rt.tokens.require(request)
    return rt


Reader = Annotated[Runtime, Depends(_read)]
Writer = Annotated[Runtime, Depends(_write)]

T = TypeVar("T")
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def _check(rt: Runtime, name: str) -> Check:
    check = rt.config.checks.get(name)
    if check is None:
        known = ", ".join(sorted(rt.config.checks)) or "none"
        raise UnknownCheck(f"check: unknown check {name!r} (configured: {known})")
    return check


def _found(value: T | None, detail: str) -> T:
    """Return `value`; answer 404 with `detail` (which names the field) when there is none."""
    if value is None:
        raise HTTPException(404, detail)
    return value


def _bad(where: str, name: str, value: Any, message: str) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "value_error", "loc": (where, name), "msg": f"{name}: {message}", "input": value}]
    )


def _day_ok(rt: Runtime, where: str, name: str, value: date) -> date:
    problem = day_problem(value, rt.clock())
    if problem:
        raise _bad(where, name, str(value), problem)
    return value


def _hour_range(
    check: Check, day: date, hour: str, where: str = "path"
) -> tuple[datetime, datetime]:
    # One hour bucket of the day, by UTC instant: a day that falls back has two 02:00.
    try:
        return buckets.resolve_hour(hour, day, check.timezone)
    except ValueError as exc:
        raise _bad(where, "hour", hour, str(exc)) from None


async def _live(rt: Runtime, c: Check, query: Callable[[], Awaitable[list[Node]]]) -> list[Node]:
    """Run one live drill-down query on both stores: a few at once, else 429; bounded in time."""
    if rt.live.locked():
        raise HTTPException(
            429,
            f"live: {rt.config.api.live_concurrency} live drill-downs are running; retry later",
            headers={"Retry-After": str(LIVE_RETRY_AFTER)},
        )
    try:
        # Taken with no await since the check above, so the slot count is exact.
        async with rt.live, asyncio.timeout(LIVE_DEADLINE):
            return await query()
    except TimeoutError:
        raise StoreTimeout(c.name, f"live drill-down exceeded {LIVE_DEADLINE:g}s") from None


async def _schedule_facts(rt: Runtime) -> dict[str, list[TriggerFacts]]:
    """Return per check what is known of each of its schedules."""
    now = rt.clock()
    # One read per check: its recent and full schedules are judged from the same runs.
    times = {name: await rt.state.trigger_times(name) for name in rt.config.checks}
    out: dict[str, list[TriggerFacts]] = {name: [] for name in rt.config.checks}
    for spec in job_specs(rt.config.checks):
        out[spec.check].append(trigger_facts(spec, times[spec.check], now))
    return out


def _trigger_out(f: TriggerFacts) -> TriggerOut:
    def iso(at: datetime | None) -> str | None:
        return at.isoformat() if at is not None else None

    return TriggerOut(
        trigger=f.trigger,
        last_started_at=iso(f.last_started),
        last_completed_at=iso(f.last_completed),
        next_due_at=iso(f.next_due),
        missed=f.missed,
    )


@router.get("/checks", response_model=ChecksOut, tags=["checks"])
async def list_checks(rt: Reader) -> ChecksOut:
    """List every configured check with its latest status."""
    latest = await rt.state.latest_runs()
    facts = await _schedule_facts(rt)
    out = []
    for name, check in sorted(rt.config.checks.items()):
        finished, success = await asyncio.gather(
            rt.state.latest_finished_run(name), rt.state.latest_success(name)
        )
        sched = check.schedule
        out.append(
            CheckOut(
                name=name,
                description=check.description,
                status=finished.status if finished else None,
                running=latest[name].status == "running" if name in latest else False,
                last_run=finished,
                last_success_at=(
                    success.finished_at.isoformat() if success and success.finished_at else None
                ),
                schedule=ScheduleOut(
                    recent_every_seconds=(
                        sched.recent_every.total_seconds() if sched.recent_every else None
                    ),
                    recent_days=sched.recent_days,
                    full_every_seconds=(
                        sched.full_every.total_seconds() if sched.full_every else None
                    ),
                    full_cron=sched.full_cron,
                    full_days=sched.full_days,
                    triggers=[_trigger_out(f) for f in facts[name]],
                ),
                coverage=registry.kind_of(check.reader.kind).coverage(check.reader.store),
                row_hash=check.row_hash,
            )
        )
    return ChecksOut(checks=out)


@router.get("/checks/{check}/days", response_model=DaysOut, tags=["drill-down"])
async def list_days(
    rt: Reader,
    check: CheckName,
    since: Annotated[
        QueryDay, Query(description="First day (default: start of the recent window).")
    ] = None,
    until: Annotated[QueryDay, Query(description="Last day, inclusive (default: today).")] = None,
) -> DaysOut:
    """Return each day's counts, digests and status from the latest run that judged it."""
    c = _check(rt, check)
    today = rt.clock().astimezone(c.timezone).date()
    last = _day_ok(rt, "query", "until", until) if until is not None else today
    first = (
        _day_ok(rt, "query", "since", since)
        if since is not None
        else last - timedelta(days=c.schedule.recent_days - 1)
    )
    if first > last:
        raise _bad("query", "since", str(first), f"is after until ({last})")
    if (last - first).days >= MAX_RANGE_DAYS:
        raise _bad("query", "since", str(first), f"the range exceeds {MAX_RANGE_DAYS} days")
    days = await rt.state.day_buckets(c.name, first, last, c.timezone)
    return DaysOut(
        check=c.name,
        since=first.isoformat(),
        until=last.isoformat(),
        days=[d.payload() for d in days],
    )


def _drilled(request: Request, rt: Runtime, check: str, day: date, live: bool) -> Check:
    """Return the check a drill-down into `day` reads; a live one needs a bearer token."""
    c = _check(rt, check)
    _day_ok(rt, "path", "day", day)
    if live:
        # A live drill-down queries both stores: only token holders, and only a few at once.
        rt.tokens.require(request)
    return c


def _live_route(path: str, model: type[BaseModel]) -> Callable[[Endpoint], Endpoint]:
    """Route a drill-down that can also query both stores live, so answer 429, 502 and 504."""
    return router.get(
        path, response_model=model, tags=["drill-down"], responses=answers(429, 502, 504)
    )


async def _stored_day(rt: Runtime, c: Check, day: date) -> StoredBucket:
    stored = await rt.state.day_bucket(c.name, day, c.timezone)
    return _found(stored, f"day: no completed run of check {c.name!r} covers {day}")


@_live_route("/checks/{check}/days/{day}", DayOut)
async def get_day(
    request: Request,
    rt: Reader,
    check: CheckName,
    day: Day,
    live: Annotated[
        bool,
        Query(
            description="Compute the day's hours from both stores instead of the stored run "
            f"{LIVE_NEEDS}. Without it a day whose differences were peeled from its digests "
            "lists no hours and says hours_live_only."
        ),
    ] = False,
) -> DayOut:
    """Return one day bucket and its hours (plus prefixes split over the whole day)."""
    c = _drilled(request, rt, check, day, live)
    stored = await _stored_day(rt, c, day)
    hours, prefixes = await rt.state.day_nodes(stored.run_id, day)
    b = stored.bucket
    # A peeled day keeps its differing rows, not hour nodes: its hours come only live.
    peeled = not hours and not prefixes and needs_drill(b.source, b.reader)
    if live:
        sides = await rt.adapters.get(c.name)
        end = next_day(b.start, c.timezone)
        hours = await _live(
            rt, c, lambda: compare_hours(c, sides.source, sides.reader, b.start, end)
        )
    return DayOut(
        check=c.name,
        bucket=stored.payload(),
        live=live,
        hours_live_only=peeled and not live,
        hours=[h.payload() for h in hours],
        prefixes=[p.payload() for p in prefixes],
    )


@_live_route("/checks/{check}/days/{day}/hours/{hour}", HourOut)
async def get_hour(
    request: Request,
    rt: Reader,
    check: CheckName,
    day: Day,
    hour: Annotated[str, Path(max_length=40, description=HOUR_HELP)],
    live: Annotated[
        bool,
        Query(description=f"Recompute from both stores instead of the stored run {LIVE_NEEDS}."),
    ] = False,
    prefix: Annotated[
        str | None,
        Query(pattern=Hex, description="Live: split this key-hash prefix one digit further (hex)."),
    ] = None,
) -> HourOut:
    """Return an hour's key-hash prefixes with both sides' count and digest."""
    c = _drilled(request, rt, check, day, live)
    start, end = _hour_range(c, day, hour)
    label = buckets.label(start, c.timezone)
    out = HourOut(
        check=c.name,
        day=day.isoformat(),
        hour=int(label[11:13]),
        label=label[11:16] + label[19:],
        start=label,
        end=buckets.label(end, c.timezone),
        live=live,
        prefix=prefix,
        run_id=None,
        node=None,
        differs=None,
        prefixes=[],
    )
    if live:
        depth = len(prefix) + 1 if prefix else 1
        sides = await rt.adapters.get(c.name)
        nodes = await _live(
            rt,
            c,
            lambda: compare_prefixes(
                c, sides.source, sides.reader, start, end, depth, [prefix] if prefix else None
            ),
        )
        out.prefixes = [n.payload() for n in nodes]
        out.differs = any(n.differs for n in nodes)
        return out
    if prefix is not None:
        raise _bad("query", "prefix", prefix, "only with live=true (stored trees are whole)")
    stored = await _stored_day(rt, c, day)
    out.run_id = stored.run_id
    node = await rt.state.hour_tree(stored.run_id, day, start)
    if node is not None:
        tree = node.payload()
        out.node = tree.model_copy(update={"children": []})
        out.differs = tree.differs
        out.prefixes = tree.children
    return out


@router.get("/checks/{check}/days/{day}/keys", response_model=KeysOut, tags=["drill-down"])
async def get_keys(
    rt: Writer,
    check: CheckName,
    day: Day,
    paging: Annotated[Page, paged(50, 500)],
    kind: Annotated[
        Literal["missing", "extra", "mismatched"] | None,
        Query(description="Only keys of this kind."),
    ] = None,
    prefix: Annotated[
        str | None, Query(pattern=Hex, description="Only keys whose key hash starts so.")
    ] = None,
    hour: Annotated[
        str | None, Query(max_length=40, description="Only keys of this hour bucket. " + HOUR_HELP)
    ] = None,
    page: Annotated[
        int | None,
        Query(
            ge=1,
            le=100_000,
            deprecated=True,
            description="Old style: page number of page_size keys; use offset.",
        ),
    ] = None,
    page_size: Annotated[
        int | None,
        Query(ge=1, le=500, deprecated=True, description="Old style: keys per page; use limit."),
    ] = None,
) -> KeysOut:
    """Return a page of the day's stored differing keys (needs a bearer token).

    A run keeps at most api.sample_keys keys of each kind per day; `sampled` says the
    kinds asked for kept fewer than the run found, and `total` counts what it found.
    """
    c = _check(rt, check)
    if page_size is not None:
        paging = Page(page_size, paging.offset)
    if page is not None:
        if paging.offset:
            raise _bad("query", "page", page, "give offset or page, not both")
        paging = Page(paging.limit, (page - 1) * paging.limit)
    stored = await _stored_day(rt, c, _day_ok(rt, "path", "day", day))
    start, end = _hour_range(c, day, hour, "query") if hour is not None else (None, None)
    found = await rt.state.bucket_keys(stored, day, KeyFilter(kind, prefix, start, end), paging)
    return KeysOut(
        check=c.name,
        day=day.isoformat(),
        run_id=stored.run_id,
        limit=paging.limit,
        offset=paging.offset,
        total=found.total,
        sampled=found.sampled,
        keys=[k.payload(c.source.composite) for k in found.keys],
    )


@router.get("/checks/{check}/runs", response_model=RunsOut, tags=["runs"])
async def list_runs(
    rt: Reader, check: CheckName, paging: Annotated[Page, paged(50, 500)]
) -> RunsOut:
    """Return the check's runs, newest first."""
    c = _check(rt, check)
    runs = await rt.state.runs(c.name, limit=paging.limit, offset=paging.offset)
    return RunsOut(check=c.name, runs=runs)


@router.get("/checks/{check}/runs/{run_id}", response_model=CheckRun, tags=["runs"])
async def get_run(
    rt: Reader, check: CheckName, run_id: Annotated[int, Path(ge=1, le=2**63 - 1)]
) -> CheckRun:
    """Return one run of the check."""
    c = _check(rt, check)
    run = await rt.state.run(c.name, run_id)
    return _found(run, f"run_id: check {c.name!r} has no run {run_id}")


@router.post(
    "/checks/{check}/runs",
    response_model=TriggeredOut,
    status_code=202,
    tags=["runs"],
    responses={409: {"description": "The check is already running."}},
)
async def trigger_run(
    rt: Writer,
    check: CheckName,
    window: Annotated[
        Literal["recent", "full"], Query(description="Which window to reconcile.")
    ] = "recent",
) -> TriggeredOut:
    """Start a run of the check now (needs a bearer token); 409 if one is in progress."""
    c = _check(rt, check)
    trigger = "manual" if window == "recent" else "manual-full"
    run_id = await rt.ticks.trigger(c.name, trigger, window=window)
    return TriggeredOut(
        check=c.name, run_id=run_id, trigger=trigger, run=f"/api/v1/checks/{c.name}/runs/{run_id}"
    )
