"""Where a PostgreSQL difference-digest pass spends its time: backend CPU, query by query.

A drifted check costs what its difference-digest pass (stores/postgres/dialect.py
day_cell_sql) costs over the day pass of a healthy one. This bench takes that pass apart
on the scale bench's source table, each query on one backend, run in turn (A B C ... A B
C ...) so a change in the machine's speed falls on all of them alike:

- floor: the bare per-day count and lookup3 digest (scale.py's floor);
- day pass: the day query a check judged healthy runs (unique_bucket_sql);
- cells, no grouping: the pass's inputs (row hash, check hash, event time, K positions)
  summed into one group, i.e. its scan and arithmetic without the cell aggregates;
- cells, counts only: the pass's grouping sets with a row count a cell and no sums;
- cells at widths 32, 546 and 4096: the pass as a check runs it;
- with --cells-agg PATH, the same cells at width 546 from one C aggregate a day
  (bench/cells_agg, built by its build.sh) in the floor's query shape: a row is one
  transition into an array, not K lookups of the executor's hash groups. Its cells and
  day aggregates must equal the SQL pass's before anything is timed; it is created in
  the bench's source database for the run and dropped after. No check uses it.

CPU is the backend process's own user + system time (/proc/PID/stat), so the server must
run on this machine; wall time is printed beside it. The queries run as the adapter runs
them: in a transaction, sorts disabled, custom plans.

    .venv/bin/python bench/scale.py --rows 2000000 --targets pg --shapes clean --prepare
    .venv/bin/python bench/cell_cost.py --rows 2000000 --repeat 5
    .venv/bin/python bench/cell_cost.py --rows 2000000 --cells-agg "$(bench/cells_agg/build.sh)"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg

sys.path.insert(0, str(Path(__file__).parent))
from driftgauge.config.frozen import Field, View
from driftgauge.config.secrets import Secret
from driftgauge.encoding import iblt
from driftgauge.stores.postgres.adapter import HASHED
from driftgauge.stores.postgres.dialect import POSTGRES
from driftgauge.stores.postgres.settings import PostgresStore
from pg_vs_reladiff import dsn
from run import section
from scale import PREFIX, floor_sql, last_day, names

WIDTHS = (32, 546, 4096)
GROUPED = " GROUP BY "
INPUTS = " FROM (SELECT b.*, "


@dataclass(frozen=True)
class Query:
    """One measured query and its parameters."""

    name: str
    sql: str
    args: tuple[object, ...]


def view(database: str, row_hash: str) -> View:
    """Return the source side of the scale bench's check."""
    store = PostgresStore(name="src", dsn=Secret(dsn(database)), timeout=3600.0)
    return View(
        store=store,
        key_column="task_id",
        time_column="completed_at",
        columns=("label",),
        fields=(Field("label", "string"),),
        key_type="integer",
        timezone=ZoneInfo("UTC"),
        table="tasks",
        row_hash=row_hash,  # type: ignore[arg-type]
    )


def queries(v: View, start: datetime, end: datetime) -> list[Query]:
    """Return the floor, the day pass, the two ablations and the pass at each width."""
    cells = POSTGRES.day_cell_sql(v)
    if INPUTS not in cells or GROUPED not in cells:
        raise SystemExit("day_cell_sql no longer has the shape this bench takes apart")
    inputs = cells[cells.index(INPUTS) + len(" FROM ") : cells.index(GROUPED)]
    ungrouped = (
        "SELECT count(*), sum(b.h), sum(b.c), sum(b.us)"
        + "".join(f", sum(b.c{j})" for j in range(iblt.K))
        + f" FROM {inputs}"
    )
    cell = ", ".join(f"c{j}" for j in range(iblt.K))
    counted = f"SELECT b.d, coalesce({cell}), count(*){INPUTS}" + cells.split(INPUTS, 1)[1]
    out = [
        Query("floor (bare day count + digest)", floor_sql(v.row_hash), ()),
        Query(
            "day pass (healthy check)", POSTGRES.unique_bucket_sql(v), (start, end, "day", "UTC")
        ),
        Query("cells: inputs, no grouping", ungrouped, (start, end, WIDTHS[1], "UTC")),
        Query(f"cells: counts only, width {WIDTHS[1]}", counted, (start, end, WIDTHS[1], "UTC")),
    ]
    return out + [Query(f"cells, width {w}", cells, (start, end, w, "UTC")) for w in WIDTHS]


def aggregated(v: View, start: datetime, end: datetime) -> Query:
    """Return the day query that sums the cells with cells_agg: the floor's shape, one aggregate.

    No count or digest beside it: sub-table 0 holds every row once, so its cells sum to
    the day's count and digest (same_cells checks that too).
    """
    sql = (
        f"SELECT date_trunc('day', r.t, $4) AS bucket, r.x AS rule, "
        f"cells_agg({POSTGRES.row_hash(v, 'r.renc')}, r.t, $3::int) AS cells "
        f"FROM ({POSTGRES.base_sql(v)}) AS r GROUP BY 1, 2"
    )
    return Query(f"cells, width {WIDTHS[1]}, one C aggregate", sql, (start, end, WIDTHS[1], "UTC"))


INSTALL = """
    DROP AGGREGATE IF EXISTS cells_agg(bigint, timestamptz, int);
    CREATE OR REPLACE FUNCTION cells_add(internal, bigint, timestamptz, int)
      RETURNS internal AS '{path}', 'cells_add' LANGUAGE C;
    CREATE OR REPLACE FUNCTION cells_final(internal)
      RETURNS bigint[] AS '{path}', 'cells_final' LANGUAGE C;
    CREATE AGGREGATE cells_agg(bigint, timestamptz, int)
      (SFUNC = cells_add, STYPE = internal, FINALFUNC = cells_final);
"""
UNINSTALL = (
    "DROP AGGREGATE IF EXISTS cells_agg(bigint, timestamptz, int);"
    " DROP FUNCTION IF EXISTS cells_add(internal, bigint, timestamptz, int);"
    " DROP FUNCTION IF EXISTS cells_final(internal)"
)


async def execute(database: str, sql: str) -> None:
    """Run statements on a connection of their own (creating or dropping cells_agg)."""
    conn = await asyncpg.connect(dsn(database))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def same_cells(database: str, sql_pass: Query, agg: Query) -> int:
    """Return how many cells both queries gave, after checking they are the same ones."""
    conn = await asyncpg.connect(dsn(database))
    try:
        async with conn.transaction():
            await conn.execute(HASHED)
            want = await conn.fetch(sql_pass.sql, *sql_pass.args, timeout=3600)
            got = await conn.fetch(agg.sql, *agg.args, timeout=3600)
    finally:
        await conn.close()
    m = (1 << 64) - 1
    want_cells = {
        (r["bucket"], r["cell"]): tuple(r[k] & m for k in ("n", "digest", "checks", "times"))
        for r in want
        if r["cell"] is not None
    }
    got_cells: dict[tuple[datetime, int], tuple[int, ...]] = {}
    got_days = {}
    width = agg.args[2]
    for r in got:
        flat = r["cells"] or []
        n = digest = 0
        for i in range(0, len(flat), 5):
            got_cells[(r["bucket"], flat[i])] = tuple(x & m for x in flat[i + 1 : i + 5])
            if flat[i] < width:
                n, digest = n + flat[i + 1], (digest + flat[i + 2]) & m
        got_days[r["bucket"]] = (n, digest)
    want_days = {r["bucket"]: (r["n"], r["digest"] & m) for r in want if r["cell"] is None}
    if want_cells != got_cells or want_days != got_days:
        raise SystemExit("cells_agg and day_cell_sql disagree: not timing a different table")
    return len(want_cells)


def cpu_seconds(pid: int) -> float:
    """Return a process's user + system CPU seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    database: str, qs: list[Query], repeat: int
) -> dict[str, list[tuple[float, float]]]:
    """Run every query `repeat` times in turn after one warm-up; return (cpu, wall) pairs."""
    conn = await asyncpg.connect(dsn(database))
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        try:
            cpu_seconds(pid)
        except FileNotFoundError:
            raise SystemExit(
                "the server's backends are not on this machine: no CPU figures"
            ) from None
        got: dict[str, list[tuple[float, float]]] = {q.name: [] for q in qs}
        for i in range(repeat + 1):
            for q in qs:
                c0, t0 = cpu_seconds(pid), time.perf_counter()
                async with conn.transaction():
                    await conn.execute(HASHED)
                    await conn.fetch(q.sql, *q.args, timeout=3600)
                if i:
                    got[q.name].append((cpu_seconds(pid) - c0, time.perf_counter() - t0))
            print(f"# round {i}/{repeat} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        return got
    finally:
        await conn.close()


def render(
    n: int, got: dict[str, list[tuple[float, float]]], loads: tuple[float, float], flags: str = ""
) -> str:
    """Return the RESULTS.md section: CPU median and spread, per row, against the floor."""
    med = {k: statistics.median(c for c, _ in v) for k, v in got.items()}
    floor = next(iter(med.values()))
    lines = [
        f"### Where a difference-digest pass goes: one PostgreSQL backend, {n:,} rows",
        "",
        f"`bench/cell_cost.py --rows {n} --repeat {len(next(iter(got.values())))}{flags}`"
        f" ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {loads[0]:.1f}-{loads[1]:.1f}):"
        " backend CPU seconds, median (min-max), the queries run in turn.",
        "",
        "| query | CPU s | us a row | x floor | wall s (median) |",
        "|---|---|---|---|---|",
    ]
    for k, v in got.items():
        cpu = sorted(c for c, _ in v)
        wall = statistics.median(w for _, w in v)
        lines.append(
            f"| {k} | {med[k]:.2f} ({cpu[0]:.2f}-{cpu[-1]:.2f}) | {med[k] / n * 1e6:.2f} |"
            f" {med[k] / floor:.2f} | {wall:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Measure the queries on the scale bench's source of --rows rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--row-hash", choices=("lookup3", "md5"), default="lookup3")
    ap.add_argument("--prefix", default=PREFIX[0], help="the scale bench's --prefix")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    ap.add_argument(
        "--cells-agg", metavar="PATH", help="also time cells_agg.so (bench/cells_agg/build.sh)"
    )
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if a.cells_agg and not Path(a.cells_agg).is_absolute():
        ap.error("--cells-agg must be an absolute path: the server loads it, not this process")
    if a.cells_agg and not Path(a.cells_agg).is_file():
        ap.error(f"--cells-agg: no file at {a.cells_agg}")
    PREFIX[0] = a.prefix
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = datetime.fromisoformat(last_day(a.rows)).replace(tzinfo=UTC) + timedelta(days=1)
    database = names(a.rows)["src"]
    v = view(database, a.row_hash)
    qs = queries(v, start, end)
    if a.cells_agg:
        agg = aggregated(v, start, end)
        at = next(i for i, q in enumerate(qs) if q.name == f"cells, width {WIDTHS[1]}")
        qs.insert(at + 1, agg)
        asyncio.run(execute(database, INSTALL.format(path=a.cells_agg)))
    try:
        if a.cells_agg:
            n = asyncio.run(same_cells(database, qs[at], agg))
            print(f"# cells_agg gave the same {n:,} cells as day_cell_sql", file=sys.stderr)
        load0 = os.getloadavg()[0]
        got = asyncio.run(measure(database, qs, a.repeat))
    finally:
        if a.cells_agg:
            asyncio.run(execute(database, UNINSTALL))
    flags = " --cells-agg .local/cells_agg/cells_agg.so" if a.cells_agg else ""
    body = render(a.rows, got, (load0, os.getloadavg()[0]), flags)
    print(body)
    if not a.no_write:
        section(f"cell-cost-{a.rows}", body)


if __name__ == "__main__":
    main()
