"""Scale runs: N rows PostgreSQL -> PostgreSQL and PostgreSQL -> OpenSearch, three drift shapes.

The source holds N tasks a fixed number of milliseconds apart over about 40 days
(generated inside PostgreSQL with generate_series). Each reader is the source with one
planted drift shape:

- clean: no drift (the floor the other shapes are compared with);
- even: 0.15% of N spread evenly over ids (0.05% missing, 0.05% mismatched, 0.05% extra);
- dense: 5% of the rows of 3 days (days 11-13) differ, a third each missing, mismatched, extra;
- sparse: 0.01% of N spread evenly over ids (one missing, one mismatched and one extra task
  every 30,000 ids: 10,000 differing tasks at 100M rows);
- hours: about 0.15% of N clustered in 6 hours of one day (08:00-14:00 of day 21): one
  missing, one mismatched and one extra task every 12 ids there.

The source is an unlogged table filled in chunks on two connections, indexed after the load
(both indexes at once), then frozen and analysed; it is built under a temporary name and
renamed when complete, so a database of the final name is a finished data set that later
invocations reuse (a crash loses only the step it was in). Long steps print a progress line.

PostgreSQL readers are template copies of the source with the drift applied in SQL; the
OpenSearch reader is one index loaded with the bulk API in parallel batches, the drift
applied before a shape's runs and reverted after. Each check is stored (so its difference
digests are sized from the previous run, as in the service): one unmeasured run first,
then the measured runs, each its own process for wall time and peak RSS. On PostgreSQL
pairs reladiff's hashdiff runs in turn with driftgauge (A B A B), and its median and
spread are reported. Every run's counts must equal the planted set exactly, or the bench
fails. The load average is recorded next to every figure: the machine is shared.

    .venv/bin/python bench/scale.py --rows 10000000 --targets pg os --shapes clean even dense
    .venv/bin/python bench/scale.py --rows 1000000 10000000 100000000 --targets pg \
        --shapes clean sparse --repeat 1 --reladiff 0
    .venv/bin/python bench/scale.py --rows 100000000 --drop   # drop what it made for N rows
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).parent))
import os_load

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address

from driftgauge.core.fields import RowHashName
from driftgauge.stores.postgres.dialect import ROW_HASHES
from os_load import os_call
from pg_row_hash import ENCODINGS
from pg_vs_reladiff import PG, PY, Planted, dsn, run_measured
from run import section
from scale_load import build_dst, build_src, reladiff_timed, say, ticking, usable

HERE = Path(__file__).resolve().parent
RECORD = HERE / "scale.json"
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
DAYS = 40
DAY_MS = 86_400_000
BASE = datetime(2026, 1, 1, tzinfo=UTC)
SHAPES = ("clean", "even", "dense", "sparse", "hours")
HOUR_MS = 3_600_000


def spacing_ms(n: int) -> int:
    """Return the milliseconds between two consecutive tasks (whole ms: OpenSearch keeps ms)."""
    return DAYS * DAY_MS // n


def last_day(n: int) -> str:
    """Return the last day holding a task."""
    return (BASE + timedelta(milliseconds=(n - 1) * spacing_ms(n))).date().isoformat()


@dataclass(frozen=True)
class Shape:
    """One planted drift: ids lo..hi with id % mod == gone are missing, == changed mismatched.

    Extra tasks (ids n+1, n+2, ...) number (hi - lo + 1) // mod, one every mod ids' time.
    """

    name: str
    mod: int
    gone: int
    changed: int
    lo: int
    hi: int

    def ids(self, residue: int) -> range:
        """Return the ids in lo..hi with id % mod == residue."""
        first = self.lo + (residue - self.lo) % self.mod
        return range(first, self.hi + 1, self.mod)

    @property
    def extras(self) -> int:
        """Return how many extra tasks the reader holds."""
        return (self.hi - self.lo + 1) // self.mod

    def extra_at(self, j: int) -> int:
        """Return the id whose time the j-th extra task (1-based) takes."""
        return self.lo + (j - 1) * self.mod + self.mod // 2

    def planted(self) -> Planted:
        """Return the exact counts the check must find."""
        return Planted(len(self.ids(self.gone)), self.extras, len(self.ids(self.changed)))


def shape(name: str, n: int) -> Shape | None:
    """Return the drift of a shape for n rows (None for clean)."""
    sp = spacing_ms(n)
    if name == "even":
        return Shape(name, 2000, 17, 1017, 1, n)
    if name == "sparse":
        # 3 of every 30,000 ids; the mismatched residue is past 10,000 so that 100M rows
        # hold 3,334 missing, 3,333 mismatched and 3,333 extra: exactly 10,000.
        return Shape(name, 30_000, 17, 15_017, 1, n)
    if name == "dense":
        lo = math.ceil(10 * DAY_MS / sp) + 1  # first id of day 11
        hi = math.ceil(13 * DAY_MS / sp)  # last id of day 13
        return Shape(name, 60, 7, 37, lo, hi)
    if name == "hours":
        lo = math.ceil((20 * DAY_MS + 8 * HOUR_MS) / sp) + 1  # first id of 08:00, day 21
        hi = math.ceil((20 * DAY_MS + 14 * HOUR_MS) / sp)  # last id before 14:00
        return Shape(name, 12, 5, 11, lo, hi)
    return None


def drift_sql(s: Shape, n: int) -> list[tuple[str, int]]:
    """Return the statements planting a shape in a copy of the source, each with its row count."""

    def where(residue: int) -> str:
        # An index lookup of each planted id: a scan of the whole table costs minutes at 100M.
        r = s.ids(residue)
        return f"task_id = ANY(ARRAY(SELECT generate_series({r.start}, {s.hi}, {s.mod})))"

    p = s.planted()
    return [
        (f"DELETE FROM tasks WHERE {where(s.gone)}", p.missing),
        (f"UPDATE tasks SET label = 'changed' WHERE {where(s.changed)}", p.mismatched),
        (
            f"INSERT INTO tasks SELECT {n} + j, 'ghost', timestamptz '2026-01-01 00:00:00+00'"
            f" + ({s.lo} + (j - 1) * {s.mod} + {s.mod // 2} - 1)"
            f" * interval '{spacing_ms(n)} milliseconds' FROM generate_series(1, {s.extras}) j",
            p.extra,
        ),
    ]


PREFIX = ["dg_scale"]  # --prefix: data sets of one's own on a shared server
TAG = [""]  # --tag: a series of one's own in the record, next to others' rows
ONE_READER = [False]  # --one-reader: keep one PostgreSQL reader on disk at a time
INDEX = [""]  # --index: the OpenSearch reader's index, when not the prefix's


def names(n: int) -> dict[str, str]:
    """Return the databases and index the bench makes for n rows."""
    p = PREFIX[0]
    return {
        "src": f"{p}_src_{n}",
        **{f"dst_{s}": f"{p}_dst_{n}_{s}" for s in SHAPES},
        "state": f"{p}_state_{n}",
        "index": INDEX[0] or f"{p.replace('_', '-')}-{n}",  # dg-scale-N by default
    }


async def prepare_pg(n: int, shapes: list[str], fresh_state: bool) -> None:
    """Create (or reuse) the source and a drifted copy per shape, and the state database."""
    nm = names(n)
    admin = await asyncpg.connect(PG)
    try:
        data_dir = str(await admin.fetchval("SHOW data_directory"))
        have = {r["datname"] for r in await admin.fetch("SELECT datname FROM pg_database")}
        for name in ("src", *shapes):
            db = nm["src" if name == "src" else f"dst_{name}"]
            s = None if name == "src" else shape(name, n)
            if db in have and await usable(db, n + (s.extras if s else 0)):
                say(f"{db}: reusing the loaded data set")
                continue
            if db in have:
                say(f"{db}: lost its rows (unlogged, after a crash?): building it again")
                await admin.execute(f'DROP DATABASE "{db}"')
                if name == "src":  # every copy of the source is suspect too
                    for other in SHAPES:
                        await admin.execute(f'DROP DATABASE IF EXISTS "{nm["dst_" + other]}"')
            if name == "src":
                await build_src(admin, n, spacing_ms(n), db, data_dir)
            else:
                plant = drift_sql(s, n) if s is not None else []
                await build_dst(admin, nm["src"], db, plant, data_dir)
        # A fresh state when asked: a drifted check's first run then really has no stored
        # verdict to size its digests from.
        if fresh_state:
            await admin.execute(f'DROP DATABASE IF EXISTS "{nm["state"]}"')
        if fresh_state or nm["state"] not in have:
            await admin.execute(f'CREATE DATABASE "{nm["state"]}"')
    finally:
        await admin.close()


async def reader_only(n: int, name: str) -> None:
    """Drop the other shapes' PostgreSQL readers and make sure this one is loaded.

    At 100M rows a reader is ~9 GB and a first pass spills ~10 GB of temporary files a
    side, so only one reader fits next to the source on this disk.
    """
    nm = names(n)
    admin = await asyncpg.connect(PG)
    try:
        for other in SHAPES:
            if other != name:
                await admin.execute(f'DROP DATABASE IF EXISTS "{nm["dst_" + other]}"')
    finally:
        await admin.close()
    await prepare_pg(n, [name], fresh_state=False)


def load_index(n: int) -> float:
    """Load the clean index once (bench/os_load.py); return the seconds it took."""
    index = names(n)["index"]
    if os_call("HEAD", f"/{index}") == 200:
        return 0.0
    t0 = time.perf_counter()
    say(f"{index}: {os_load.load(index, n, spacing_ms(n))}")
    return time.perf_counter() - t0


def os_drift(n: int, s: Shape, revert: bool) -> None:
    """Plant a shape in the index, or take it back out (by task id: documents have no set id)."""
    index = names(n)["index"]
    sp = spacing_ms(n)
    gone, changed = list(s.ids(s.gone)), list(s.ids(s.changed))
    at = [os_load.BASE_MS + (s.extra_at(j) - 1) * sp for j in range(1, s.extras + 1)]
    extra = [(n + j, "ghost", t) for j, t in enumerate(at, 1)]
    if revert:
        took = os_load.delete_ids(index, changed + [i for i, _, _ in extra])
        back = [(i, f"label_{i % 7}", os_load.BASE_MS + (i - 1) * sp) for i in gone + changed]
        put = os_load.index_docs(index, back)
        want = (len(changed) + len(extra), len(back))
    else:
        took = os_load.delete_ids(index, gone + changed)
        new = [(i, "changed", os_load.BASE_MS + (i - 1) * sp) for i in changed] + extra
        put = os_load.index_docs(index, new)
        want = (len(gone) + len(changed), len(new))
    if (took, put) != want:
        raise SystemExit(f"{index}: deleted {took}, indexed {put}; wanted {want}")


CONFIG = """
stores:
  src: {{kind: postgres, dsn: "{src}", timeout_seconds: 3600}}
{dsts}
  os: {{kind: opensearch, url: "{os}", timeout_seconds: 3600}}
state: {{dsn: "{state}"}}
checks:
{checks}
"""
CHECK = """  {name}:
    source: {{store: src, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: {store}, {where}, key: task_id, time: completed_at}}
    key_type: integer
    fields: {{label: string}}
    settle: 0s
"""


def write_config(n: int) -> str:
    """Write the config holding one check per target and shape; return its path."""
    nm = names(n)
    dsts = "\n".join(
        f'  dst_{s}: {{kind: postgres, dsn: "{dsn(nm["dst_" + s])}", timeout_seconds: 3600}}'
        for s in SHAPES
    )
    checks = "".join(
        CHECK.format(name=f"pg_{s}", store=f"dst_{s}", where="table: tasks") for s in SHAPES
    ) + "".join(
        CHECK.format(name=f"os_{s}", store="os", where=f"index: {nm['index']}") for s in SHAPES
    )
    text = CONFIG.format(
        src=dsn(nm["src"]), dsts=dsts, os=OS_URL, state=dsn(nm["state"]), checks=checks
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write(text)
    return f.name


def driftgauge(config: str, check: str, n: int, store: bool = True) -> dict[str, Any]:
    """Run one `driftgauge check` (stored, or no history with --no-store); return its figures."""
    load = os.getloadavg()[0]
    cmd = [PY, "-m", "driftgauge.cli", "check", check, "--config", config, "--json"]
    cmd += ["--since", "2026-01-01", "--until", last_day(n)]
    cmd += [] if store else ["--no-store"]
    with ticking(f"{check} at {n:,}"):
        wall, rss, out = run_measured(cmd)
    res = json.loads(out)
    if res["error"]:
        raise SystemExit(f"{check}: {res['error']}")
    t = res["totals"]
    return {
        "wall_s": round(wall, 2),
        "load": round(load, 1),
        "rss_mb": round(rss, 1),
        "found": {k: t[k] for k in ("missing", "extra", "mismatched")},
        "duplicates": t["duplicates"],
        "expected": t["expected"],
        "rows_per_s": round(t["expected"] / wall),
        **{
            k: res[k]
            for k in (
                "queries",
                "rows_fetched",
                "rows_scanned",
                "source_seconds",
                "reader_seconds",
                "row_hash",
                "status",
            )
        },
    }


def spread(runs: list[dict[str, Any]], key: str = "wall_s") -> dict[str, float]:
    """Return the median, min and max of one figure over runs."""
    xs = [r[key] for r in runs]
    return {"median": round(statistics.median(xs), 2), "min": min(xs), "max": max(xs)}


def entry(
    target: str, name: str, n: int, first: dict[str, Any] | None, dg: list[dict[str, Any]]
) -> dict[str, Any]:
    """Return the recorded result of one target and shape from its runs so far."""
    s = shape(name, n)
    mid = sorted(dg, key=lambda r: r["wall_s"])[len(dg) // 2]
    return {
        "rows": n,
        "target": target,
        "shape": name,
        "tag": TAG[0],
        "planted": asdict(s.planted() if s else Planted(0, 0, 0)),
        "first_run": first,
        "runs": dg,
        "median": mid,
        "wall": spread(dg),
        "load": spread(dg, "load"),
        "rss_max_mb": max(r["rss_mb"] for r in dg),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def exact(check: str, n: int, want: Planted, r: dict[str, Any]) -> None:
    """Fail the bench unless a run found exactly the planted counts."""
    if r["found"] != asdict(want) or r.get("duplicates", 0) != 0 or r.get("expected", n) != n:
        raise SystemExit(f"{check}: found {r['found']} of {r.get('expected')}, planted {want}")


def measure(
    config: str,
    target: str,
    group: list[str],
    n: int,
    repeat: int,
    reladiff: int,
    reladiff_shapes: list[str],
    deadline: datetime | None,
    first_runs: bool = False,
    floors: bool = False,
) -> None:
    """Run shapes side by side: a warm-up of each, then rounds of each in turn.

    Each round runs driftgauge on every shape, then reladiff where asked; the results
    are recorded after every round, so a stopped bench keeps what it measured. With
    `first_runs`, each round also runs every check with --no-store: a first run, with no
    stored verdict to plan from (the clean one too: what a stateless check pays). With
    `floors`, each round also runs the bare lookup3 and md5 floors, so the clean check's
    ratio to them is of one run.
    """
    want = {name: (s.planted() if (s := shape(name, n)) else Planted(0, 0, 0)) for name in group}
    # A check's first run has no stored verdict: drift unknown, it spreads difference
    # digests over the window, which a clean check judged healthy never pays (253 s
    # against 115 s at 100M). So every check runs once unmeasured; a drifted check's first
    # run is recorded apart, since it also sizes the next run's digests.
    first: dict[str, dict[str, Any] | None] = dict.fromkeys(group)
    for name in group:
        check = f"{target}_{name}"
        drifted = shape(name, n) is not None
        why = "sizes the next digests" if drifted else "stores a verdict, not measured"
        say(f"{check} at {n:,}: first run ({why})")
        if ONE_READER[0] and target == "pg":
            asyncio.run(reader_only(n, name))
        got = driftgauge(config, check, n)
        exact(check, n, want[name], got)
        say(f"{check} at {n:,} first run {got}")
        if drifted:
            first[name] = got
    dg: dict[str, list[dict[str, Any]]] = {name: [] for name in group}
    rd: dict[str, list[dict[str, Any]]] = {name: [] for name in group}
    fr: dict[str, list[dict[str, Any]]] = {name: [] for name in group}
    fl: dict[str, list[dict[str, float]]] = {"lookup3": [], "md5": []}
    floors = floors and target == "pg" and "clean" in group
    for i in range(max(repeat, reladiff)):
        if i < repeat and floors:
            if ONE_READER[0]:
                # The floors read the clean reader, which the last shape's copy replaced.
                asyncio.run(reader_only(n, "clean"))
            for h in fl:
                fl[h].append(floor_run(n, h))  # type: ignore[arg-type]
        for name in group:
            check = f"{target}_{name}"
            if i < repeat:
                if ONE_READER[0] and target == "pg":
                    asyncio.run(reader_only(n, name))
                dg[name].append(driftgauge(config, check, n))
                exact(check, n, want[name], dg[name][-1])
                say(f"{check} at {n:,} driftgauge {dg[name][-1]}")
            if i < repeat and first_runs:
                fr[name].append(driftgauge(config, check, n, store=False))
                exact(check, n, want[name], fr[name][-1])
                say(f"{check} at {n:,} first run (--no-store) {fr[name][-1]}")
        for name in group:
            if i < reladiff and name in reladiff_shapes:
                left = (deadline - datetime.now(UTC)).total_seconds() if deadline else 86_400.0
                r = reladiff_timed(names(n)["src"], names(n)[f"dst_{name}"], left)
                if "found" in r:
                    exact(f"{target}_{name} reladiff", n, want[name], r)
                rd[name].append(r)
                say(f"{target}_{name} at {n:,} reladiff {r}")
        for name in group:
            if not dg[name]:
                continue
            e = entry(target, name, n, first[name], dg[name])
            if fr[name]:
                e["first_runs"] = {
                    "runs": fr[name],
                    "wall": spread(fr[name]),
                    "load": spread(fr[name], "load"),
                }
            if name == "clean" and fl["lookup3"]:
                e["floor"] = floor_entry(fl) | {"same_rounds": True}
            done = [r for r in rd[name] if "wall_s" in r]
            if rd[name]:
                e["reladiff"] = {"runs": rd[name]}
            if done:
                e["reladiff"] |= {"wall": spread(done), "load": spread(done, "load")}
            record(e)


def floor_sql(row_hash: RowHashName) -> str:
    """Return the bare per-day count + digest query over the whole table."""
    _, t, enc = ENCODINGS["narrow"]
    return (
        f"SELECT date_trunc('day', {t}, 'UTC') AS day, count(*),"
        f" sum({ROW_HASHES[row_hash].format(enc)}) FROM tasks GROUP BY 1"
    )


async def floor_once(n: int, row_hash: RowHashName) -> float:
    """Return the wall time of the bare per-day count + digest query on both sides at once."""
    sql = floor_sql(row_hash)
    nm = names(n)
    a, b = await asyncpg.connect(dsn(nm["src"])), await asyncpg.connect(dsn(nm["dst_clean"]))
    try:
        t0 = time.perf_counter()
        await asyncio.gather(a.fetch(sql, timeout=3600), b.fetch(sql, timeout=3600))
        return time.perf_counter() - t0
    finally:
        await a.close()
        await b.close()


def floor_run(n: int, row_hash: RowHashName) -> dict[str, float]:
    """Run one floor (both sides at once); return its wall time and the load before it."""
    load = os.getloadavg()[0]
    wall = asyncio.run(floor_once(n, row_hash))
    got = {"wall_s": round(wall, 2), "load": round(load, 1)}
    print(f"# floor {row_hash} {got}", file=sys.stderr, flush=True)
    return got


def floor_entry(got: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Return the recorded floors: each hash's wall spread and load."""
    return {h: {"wall": spread(r), "load": spread(r, "load")} for h, r in got.items()}


def floor(n: int, repeat: int) -> None:
    """Add the lookup3 and md5 floors, run in turn, to the recorded PG->PG clean result."""
    got: dict[str, list[dict[str, float]]] = {"lookup3": [], "md5": []}
    for _ in range(repeat):
        for h in got:
            got[h].append(floor_run(n, h))  # type: ignore[arg-type]
    data = json.loads(RECORD.read_text())
    entry = data[f"{n}/pg/clean"]
    entry["floor"] = floor_entry(got)
    record(entry)


def record(entry: dict[str, Any]) -> None:
    """Keep one result in bench/scale.json (keyed by rows, target, shape) and re-render."""
    data = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    data[record_key(entry, entry["shape"])] = entry
    RECORD.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    section("scale", render(data))


def record_key(e: dict[str, Any], name: str) -> str:
    """Return the record key of a result's shape `name`: rows/target/shape[/tag]."""
    tag = e.get("tag")
    return f"{e['rows']}/{e['target']}/{name}" + (f"/{tag}" if tag else "")


def order(k: str) -> tuple[int, str, str, int]:
    """Sort recorded results by rows, pair, series, then shape."""
    rows, target, name, *tag = k.split("/")
    return int(rows), target, "".join(tag), SHAPES.index(name)


PAIRS = {"pg": "PG->PG", "os": "PG->OpenSearch", "trino": "PG->Trino", "spark": "PG->Spark"}


def pair(e: dict[str, Any]) -> str:
    """Return the pair a result ran on, with its series tag."""
    name = PAIRS[e["target"]]
    return name + (f" ({e['tag']})" if e.get("tag") else "")


def render(data: dict[str, Any]) -> str:
    """Return the Scale section of RESULTS.md from every recorded result."""
    lines = [
        "## Scale",
        "",
        "`make bench-scale` (bench/scale.py): N tasks over 40 days, stored checks (difference"
        " digests sized from the previous run, negotiated row hash), the median of the"
        " measured runs after one warm-up run; `load` is the 1-minute load average when"
        " each run started (2 cores shared by eight people: ratios of runs made side by side"
        " mean more than absolute times). Every run found exactly the planted counts.",
        "",
        "| rows | pair | drift | wall s (min-max) | load | rows/s | source s | reader s"
        " | peak RSS MB | queries | rows fetched | rows scanned | hash | vs clean"
        " | reladiff median s (min-max, load) | dg / reladiff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(data, key=order):
        e = data[key]
        m, w = e["median"], e["wall"]
        clean = data.get(record_key(e, "clean"))
        vs = (
            f"{w['median'] / clean['wall']['median']:.2f}x"
            if clean and e["shape"] != "clean"
            else ""
        )
        rd = e.get("reladiff")
        rdtxt = ratio = ""
        if rd and "wall" in rd:
            rdtxt = (
                f"{rd['wall']['median']} ({rd['wall']['min']}-{rd['wall']['max']}, load"
                f" {rd['load']['median']})"
            )
            ratio = f"{w['median'] / rd['wall']['median']:.3f}"
        elif rd and (stopped := [r for r in rd["runs"] if "unfinished_after_s" in r]):
            # Stopped at the deadline: its time is a lower bound, the ratio an upper one.
            t = stopped[0]["unfinished_after_s"]
            rdtxt = f"> {t} (stopped unfinished, load {stopped[0]['load']})"
            ratio = f"< {w['median'] / t:.3f}"
        p = e["planted"]
        lines.append(
            f"| {e['rows']:,} | {pair(e)}"
            f" | {e['shape']}{', first run only' if e.get('first_only') else ''}"
            f" ({p['missing']}/{p['extra']}/{p['mismatched']})"
            f" | {w['median']} ({w['min']}-{w['max']}, {len(e['runs'])} runs)"
            f" | {e['load']['median']} | {m['rows_per_s']:,} | {m['source_seconds']}"
            f" | {m['reader_seconds']} | {e['rss_max_mb']} | {m['queries']}"
            f" | {m['rows_fetched']:,} | {m['rows_scanned']:,} | {m['row_hash']} | {vs}"
            f" | {rdtxt} | {ratio} |"
        )
    # A first-only result's row in the table is its first run: nothing to compare it with.
    firsts = [
        k
        for k in sorted(data, key=order)
        if data[k].get("first_run") and not data[k].get("first_only")
    ]
    if firsts:
        lines += ["", "First runs of the drifted checks (no stored verdict):"]
    for key in firsts:
        e, f = data[key], data[key]["first_run"]
        lines.append(
            f"- {e['rows']:,} {pair(e)}"
            f" {e['shape']}: {f['wall_s']} s at load {f['load']}"
            f" ({f['wall_s'] / e['wall']['median']:.2f}x the sized median), {f['queries']}"
            f" queries, {f['rows_fetched']:,} rows fetched, peak RSS {f['rss_mb']} MB"
        )
    for key in sorted(data, key=order):
        fl = data[key].get("floor")
        if not fl:
            continue
        dg = data[key]["wall"]["median"]
        lk, md = fl["lookup3"]["wall"], fl["md5"]["wall"]
        when = "in the same rounds as the checks" if fl.get("same_rounds") else "run in turn"
        lines += [
            "",
            f"Floor at {data[key]['rows']:,} rows, {pair(data[key])} (the bare per-day count +"
            f" digest query on both sides at once, {when}): lookup3 {lk['median']} s"
            f" ({lk['min']}-{lk['max']},"
            f" load {fl['lookup3']['load']['median']}), md5 {md['median']} s ({md['min']}-"
            f"{md['max']}, load {fl['md5']['load']['median']}). No-drift check / lookup3 floor:"
            f" **{dg / lk['median']:.2f}**; / md5 floor: **{dg / md['median']:.2f}**.",
        ]
    lines += first_run_lines(data)
    lines += [
        "",
        "drift: missing/extra/mismatched planted (and found). clean: none; even: 0.15% of the"
        " rows spread evenly over ids; dense: 5% of the rows of 3 days; sparse: 0.01% of the"
        " rows spread evenly over ids (10,000 at 100M); hours: about 0.15% of the rows in 6"
        " hours of one day (a quarter of those hours' rows). The first (warm-up)"
        " run of a drifted check has no stored verdict to size its digests from: it spreads"
        " a budget of cells over the window's days and scans a day that does not peel once"
        " more, wider (encoding/sizing.py); its wall time is in bench/scale.json"
        " (`first_run`).",
    ]
    return "\n".join(lines)


def first_run_lines(data: dict[str, Any]) -> list[str]:
    """Return a line per result with first runs (--first-runs), against its rounds' others."""
    lines = []
    for key in sorted(data, key=order):
        e = data[key]
        fr = e.get("first_runs")
        if not fr:
            continue
        w, mid = fr["wall"], sorted(fr["runs"], key=lambda r: r["wall_s"])[len(fr["runs"]) // 2]
        clean = data.get(f"{e['rows']}/{e['target']}/clean")
        vs_clean = f", **{w['median'] / clean['wall']['median']:.2f}x** clean" if clean else ""
        lines += [
            "",
            f"First runs at {e['rows']:,} rows, {e['target']} {e['shape']} (`--no-store`: no"
            f" stored verdict, run in the same rounds): {w['median']} s ({w['min']}-{w['max']},"
            f" {len(fr['runs'])} runs, load {fr['load']['median']}), {mid['queries']} queries,"
            f" {mid['rows_fetched']:,} rows fetched, peak RSS"
            f" {max(r['rss_mb'] for r in fr['runs'])} MB;"
            f" {w['median'] / e['wall']['median']:.2f}x the sized runs{vs_clean}.",
        ]
    return lines


async def drop(n: int) -> None:
    """Drop the databases and the index the bench made for n rows."""
    nm = names(n)
    admin = await asyncpg.connect(PG)
    try:
        for key in ("src", *(f"dst_{s}" for s in SHAPES), "state"):
            await admin.execute(f'DROP DATABASE IF EXISTS "{nm[key]}"')
    finally:
        await admin.close()
    if os_call("HEAD", f"/{nm['index']}") == 200:
        os_call("DELETE", f"/{nm['index']}")


def main() -> None:
    """Prepare, measure and record the requested runs."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000_000], help="one or more N")
    ap.add_argument("--targets", nargs="+", choices=("pg", "os"), default=["pg", "os"])
    ap.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES[:3]))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reladiff", type=int, default=3, help="reladiff runs per PG pair")
    ap.add_argument("--drop", action="store_true", help="drop what the bench made, then stop")
    ap.add_argument("--floor", action="store_true", help="measure the PG->PG floors, then stop")
    ap.add_argument("--prepare", action="store_true", help="load the data sets, then stop")
    ap.add_argument(
        "--fresh-state", action="store_true", help="forget the verdicts stored by earlier runs"
    )
    ap.add_argument("--prefix", default=PREFIX[0], help="database names start with this")
    ap.add_argument("--tag", default="", help="record the runs as a series of their own")
    ap.add_argument(
        "--one-reader",
        action="store_true",
        help="keep one PostgreSQL reader on disk, copying it from the source before its runs",
    )
    ap.add_argument("--index", default="", help="the OpenSearch index (default from --prefix)")
    ap.add_argument("--reladiff-shapes", nargs="+", choices=SHAPES, help="default: --shapes")
    ap.add_argument(
        "--first-runs", action="store_true", help="also run drifted checks with no history"
    )
    ap.add_argument(
        "--floors", action="store_true", help="run the lookup3 and md5 floors in every round"
    )
    ap.add_argument(
        "--reladiff-until", help="HH:MM UTC: stop a reladiff run then, keep the lower bound"
    )
    args = ap.parse_args()
    PREFIX[0], TAG[0], ONE_READER[0] = args.prefix, args.tag, args.one_reader
    INDEX[0] = args.index
    until = None
    if args.reladiff_until:
        hh, mm = map(int, args.reladiff_until.split(":"))
        until = datetime.now(UTC).replace(hour=hh, minute=mm, second=0, microsecond=0)
    for n in args.rows:
        if args.floor:
            floor(n, args.repeat)
            continue
        if args.drop:
            asyncio.run(drop(n))
            continue
        readers = args.shapes if "pg" in args.targets and not args.one_reader else []
        asyncio.run(prepare_pg(n, readers, args.fresh_state))
        if args.prepare:
            continue
        config = write_config(n)
        try:
            for target in args.targets:
                if target == "os":
                    say(f"index loaded in {load_index(n):.0f} s")
                # PostgreSQL readers are databases of their own, so their shapes run side by
                # side; the OpenSearch reader is one index that holds one shape at a time.
                groups = [args.shapes] if target == "pg" else [[name] for name in args.shapes]
                for group in groups:
                    s = shape(group[0], n) if target == "os" else None
                    if s is not None:
                        os_drift(n, s, revert=False)
                    try:
                        measure(
                            config,
                            target,
                            group,
                            n,
                            args.repeat,
                            args.reladiff * (target == "pg"),
                            args.reladiff_shapes or args.shapes,
                            until,
                            args.first_runs,
                            args.floors,
                        )
                    finally:
                        if s is not None:
                            os_drift(n, s, revert=True)
        finally:
            os.unlink(config)


if __name__ == "__main__":
    main()
