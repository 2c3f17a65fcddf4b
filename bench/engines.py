"""Scale runs on distributed engines: N rows PostgreSQL -> Trino and PostgreSQL -> Spark.

The source is bench/scale.py's: N tasks a fixed number of milliseconds apart over 40 days,
generated inside PostgreSQL. Each engine writes its own copy with the same formula, in its
own files: Trino a Hive Parquet table (`CREATE TABLE AS` over generated sequences), Spark
a Parquet folder (`spark.range`), both under .local. A drifted reader is a view over the
engine's clean table planting one of scale.py's shapes (missing ids filtered out,
mismatched labels rewritten, extra tasks unioned in), so each shape costs no second copy
of the data and reladiff reads the same view. Each check runs once unmeasured (it stores a
verdict), then in rounds: driftgauge on every shape, then reladiff's hashdiff on the
Trino pairs (reladiff has no Spark Connect driver). Every run must find exactly the
planted counts. Results go to bench/scale.json and the Scale table of RESULTS.md, with
what each side's engine spent (source s, reader s).

    .venv/bin/python bench/engines.py --rows 1000000 --repeat 1 --reladiff 1
    .venv/bin/python bench/engines.py --rows 100000000 --shapes clean dense --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tools/
from tools.local_stores import address, local_dir

import scale
from pg_vs_reladiff import RELADIFF, Planted, dsn
from scale import (
    SHAPES,
    Shape,
    driftgauge,
    entry,
    exact,
    names,
    prepare_pg,
    record,
    shape,
    spacing_ms,
)
from scale_load import reladiff_timed, say, ticking

TRINO_URL = address("DRIFTGAUGE_TEST_TRINO_URL")
SPARK_URL = address("DRIFTGAUGE_TEST_SPARK_URL")
SCHEMA = "bench"  # the Hive schema (Trino) and database (Spark) the bench writes
EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, scale.BASE
TARGETS = ("trino", "spark")

# reladiff's script of pg_vs_reladiff, its reader table named by a third argument.
RELADIFF_TRINO = RELADIFF.replace(
    'connect_to_table(sys.argv[2], "tasks"', "connect_to_table(sys.argv[2], sys.argv[3]"
)
assert RELADIFF_TRINO != RELADIFF


def table(n: int, name: str = "clean") -> str:
    """Return the name of the engine's clean table, or of one shape's view over it."""
    return f"tasks_{n}" if name == "clean" else f"tasks_{n}_{name}"


# Each engine's spelling of the two things the shapes' SQL needs: the integers 1..count
# as a relation of column `j`, and the time of task `i` (1-based) at n rows.
def trino_ints(count: int) -> str:
    """Return Trino SQL for 1..count as column j (a sequence holds at most 10,000)."""
    hi = (count - 1) // 10_000
    return (
        f"(SELECT CAST(h AS bigint) * 10000 + l AS j FROM UNNEST(sequence(0, {hi})) AS a(h)"
        f" CROSS JOIN UNNEST(sequence(1, 10000)) AS b(l) WHERE h * 10000 + l <= {count})"
    )


def trino_time(i: str, n: int) -> str:
    """Return Trino SQL for the time of task i: a timestamp(6) read as UTC."""
    # date_add overflows past 2^31 milliseconds; an interval times a bigint does not.
    return (
        "TIMESTAMP '2026-01-01 00:00:00.000000'"
        f" + INTERVAL '0.001' SECOND * (({i} - 1) * {spacing_ms(n)})"
    )


def spark_ints(count: int) -> str:
    """Return Spark SQL for 1..count as column j."""
    return f"(SELECT id AS j FROM range(1, {count + 1}))"


def spark_time(i: str, n: int) -> str:
    """Return Spark SQL for the time of task i: a TIMESTAMP instant."""
    return f"timestamp_millis({EPOCH_MS} + ({i} - 1) * {spacing_ms(n)})"


def clean_sql(
    ints: Callable[[int], str], time_of: Callable[[str, int], str], text: str, n: int
) -> str:
    """Return the query generating the clean copy of the source's n tasks (`text`: the type)."""
    return (
        f"SELECT j AS task_id, concat('label_', CAST(j % 7 AS {text})) AS label,"
        f" {time_of('j', n)} AS completed_at FROM {ints(n)} AS t"
    )


def drift_view(
    ints: Callable[[int], str], time_of: Callable[[str, int], str], s: Shape, n: int, clean: str
) -> str:
    """Return the query planting shape s over the clean table, as scale.drift_sql does."""

    def planted(residue: int) -> str:
        return f"task_id BETWEEN {s.lo} AND {s.hi} AND task_id % {s.mod} = {residue % s.mod}"

    at = f"{s.lo} + (j - 1) * {s.mod} + {s.mod // 2}"
    return (
        f"SELECT task_id, CASE WHEN {planted(s.changed)} THEN 'changed' ELSE label END AS label,"
        f" completed_at FROM {clean} WHERE NOT ({planted(s.gone)})"
        f" UNION ALL SELECT {n} + j, 'ghost', {time_of(at, n)} FROM {ints(s.extras)} AS e"
    )


def trino_run(sql: str) -> list[tuple[Any, ...]]:
    """Run one Trino statement to completion; return its rows."""
    import trino.dbapi

    u = urlsplit(TRINO_URL)
    conn = trino.dbapi.connect(host=u.hostname, port=u.port, user="bench", catalog="hive")
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


_SIZE = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
_TIME = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _amount(text: str, units: dict[str, float]) -> float:
    """Return a Trino DataSize or Duration string ("233.03MB", "1.20m") in base units."""
    num = text.rstrip("abcdefghijklmnopqrstuvwxyzAB")
    return float(num) * units[text[len(num) :]]


def trino_spent(since: datetime) -> dict[str, float]:
    """Return what Trino spent on the bench user's queries created since `since`.

    CPU seconds summed, the largest peak user memory of one query, the rows it read:
    from the coordinator's query list (`/v1/query`), which keeps recent queries.
    """
    req = urllib.request.Request(f"{TRINO_URL}/v1/query", headers={"X-Trino-User": "bench"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        queries = json.load(resp)
    mine = [
        q["queryStats"]
        for q in queries
        if q["session"].get("user") == "bench"
        and datetime.fromisoformat(q["queryStats"]["createTime"]) >= since
    ]
    return {
        "queries": len(mine),
        "cpu_s": round(sum(_amount(q["totalCpuTime"], _TIME) for q in mine), 1),
        "peak_memory_mb": round(
            max((_amount(q["peakUserMemoryReservation"], _SIZE) for q in mine), default=0) / 1e6,
            1,
        ),
        "rows_read": sum(int(q["rawInputPositions"]) for q in mine),
    }


def prepare_trino(n: int, shapes: list[str]) -> None:
    """Write the clean Hive Parquet table with Trino (or reuse it) and a view per shape."""
    trino_run(f"CREATE SCHEMA IF NOT EXISTS hive.{SCHEMA}")
    clean = f"hive.{SCHEMA}.{table(n)}"
    try:
        have = trino_run(f"SELECT count(*) FROM {clean}")[0][0]
    except Exception:  # no such table yet
        have = None
    if have != n:
        if have is not None:
            trino_run(f"DROP TABLE {clean}")
        t0 = time.perf_counter()
        with ticking(f"trino: writing {n:,} tasks"):
            trino_run(
                f"CREATE TABLE {clean} WITH (format = 'PARQUET') AS"
                f" {clean_sql(trino_ints, trino_time, 'varchar', n)}"
            )
        say(f"trino: {clean} written in {time.perf_counter() - t0:.1f} s")
    for name in shapes:
        if (s := shape(name, n)) is not None:
            view = drift_view(trino_ints, trino_time, s, n, clean)
            trino_run(f"CREATE OR REPLACE VIEW hive.{SCHEMA}.{table(n, name)} AS {view}")


def spark_folder(n: int) -> Path:
    """Return the Parquet folder of the clean Spark copy."""
    return local_dir() / "bench" / "spark" / table(n)


def prepare_spark(n: int, shapes: list[str]) -> None:
    """Write the clean Parquet folder with Spark (or reuse it), a table over it, a view a shape."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(SPARK_URL).getOrCreate()
    try:
        folder = spark_folder(n)
        try:
            have = spark.read.parquet(str(folder)).count()
        except Exception:  # no folder yet
            have = None
        if have != n:
            t0 = time.perf_counter()
            with ticking(f"spark: writing {n:,} tasks"):
                rows = spark.sql(clean_sql(spark_ints, spark_time, "string", n))
                rows.write.mode("overwrite").parquet(str(folder))
            say(f"spark: {folder} written in {time.perf_counter() - t0:.1f} s")
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
        # The server's catalog is in memory: the table over the folder is made again each time.
        spark.sql(f"DROP TABLE IF EXISTS {SCHEMA}.{table(n)}")
        spark.sql(f"CREATE TABLE {SCHEMA}.{table(n)} USING parquet LOCATION '{folder}'")
        for name in shapes:
            if (s := shape(name, n)) is not None:
                view = drift_view(spark_ints, spark_time, s, n, f"{SCHEMA}.{table(n)}")
                spark.sql(f"CREATE OR REPLACE VIEW {SCHEMA}.{table(n, name)} AS {view}")
    finally:
        spark.stop()


CONFIG = """
stores:
  src: {{kind: postgres, dsn: "{src}", timeout_seconds: 3600}}
  trino: {{kind: trino, url: "{trino}", catalog: hive, schema: {schema}, user: bench,
          timeout_seconds: 3600}}
  spark: {{kind: spark, url: "{spark}", timeout_seconds: 3600}}
state: {{dsn: "{state}"}}
checks:
{checks}
"""


def write_config(n: int, shapes: list[str]) -> str:
    """Write the config holding one check per engine and shape; return its path."""
    nm = names(n)
    checks = "".join(
        scale.CHECK.format(
            name=f"{target}_{name}",
            store=target,
            where=f"table: {SCHEMA}.{table(n, name)}",
        )
        for target in TARGETS
        for name in shapes
    )
    text = CONFIG.format(
        src=dsn(nm["src"]),
        trino=TRINO_URL,
        spark=SPARK_URL,
        schema=SCHEMA,
        state=dsn(nm["state"]),
        checks=checks,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write(text)
    return f.name


def reladiff_trino(n: int, name: str, limit: float) -> dict[str, Any]:
    """Run reladiff's hashdiff from the PostgreSQL source to one Trino table or view."""
    u = urlsplit(TRINO_URL)
    uri = f"trino://bench@{u.hostname}:{u.port}/hive/{SCHEMA}"
    src = names(n)["src"]
    args = [dsn(src), uri, table(n, name)]
    return reladiff_timed(src, table(n, name), limit, script=RELADIFF_TRINO, args=args)


def measure(
    config: str,
    targets: list[str],
    shapes: list[str],
    n: int,
    repeat: int,
    reladiff: int,
    deadline: datetime | None,
    warm_up: bool = True,
) -> None:
    """Run every check once unmeasured, then rounds of driftgauge (and reladiff on Trino).

    Without `warm_up` the first round is measured: neither engine has difference digests,
    so a stored verdict changes nothing a run does (at 100M a warm-up costs minutes).
    """
    want = {s: (sh.planted() if (sh := shape(s, n)) else Planted(0, 0, 0)) for s in shapes}
    first: dict[str, dict[str, Any] | None] = dict.fromkeys(
        (f"{t}_{s}" for t in targets for s in shapes), None
    )
    for target in targets if warm_up else []:
        for name in shapes:
            check = f"{target}_{name}"
            say(f"{check} at {n:,}: first run (stores a verdict, not measured)")
            got = driftgauge(config, check, n)
            exact(check, n, want[name], got)
            say(f"{check} at {n:,} first run {got}")
            first[check] = got if name != "clean" else None
    dg: dict[str, list[dict[str, Any]]] = {f"{t}_{s}": [] for t in targets for s in shapes}
    rd: dict[str, list[dict[str, Any]]] = {s: [] for s in shapes}
    for i in range(max(repeat, reladiff)):
        for check in dg:
            target, name = check.split("_", 1)
            if i < repeat:
                since = datetime.now(UTC)
                dg[check].append(driftgauge(config, check, n))
                if target == "trino":
                    dg[check][-1]["trino"] = trino_spent(since)
                exact(check, n, want[name], dg[check][-1])
                say(f"{check} at {n:,} driftgauge {dg[check][-1]}")
            if target == "trino" and i < reladiff:
                left = (deadline - datetime.now(UTC)).total_seconds() if deadline else 86_400.0
                r = reladiff_trino(n, name, left)
                if "found" in r:
                    exact(f"{check} reladiff", n, want[name], r)
                rd[name].append(r)
                say(f"{check} at {n:,} reladiff {r}")
        for check, runs in dg.items():
            if not runs:
                continue
            target, name = check.split("_", 1)
            e = entry(target, name, n, first[check], runs)
            done = [r for r in rd[name] if "wall_s" in r] if target == "trino" else []
            if target == "trino" and rd[name]:
                e["reladiff"] = {"runs": rd[name]}
            if done:
                e["reladiff"] |= {"wall": scale.spread(done), "load": scale.spread(done, "load")}
            record(e)


def main() -> None:
    """Load the data sets, then measure."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    ap.add_argument("--shapes", nargs="+", choices=SHAPES, default=["clean", "dense"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reladiff", type=int, default=1, help="reladiff runs per Trino shape")
    ap.add_argument("--prepare", action="store_true", help="load the data sets, then stop")
    ap.add_argument("--no-warm-up", action="store_true", help="measure the first round too")
    ap.add_argument("--tag", default="engines", help="the series' tag in the record")
    ap.add_argument(
        "--deadline", help="UTC time (ISO) after which a reladiff run is stopped unfinished"
    )
    args = ap.parse_args()
    scale.TAG[0] = args.tag
    n = args.rows
    t0 = time.perf_counter()
    asyncio.run(prepare_pg(n, [], fresh_state=False))
    say(f"postgres: source ready ({time.perf_counter() - t0:.1f} s)")
    if "trino" in args.targets:
        prepare_trino(n, args.shapes)
    if "spark" in args.targets:
        prepare_spark(n, args.shapes)
    if args.prepare:
        return
    deadline = datetime.fromisoformat(args.deadline) if args.deadline else None
    config = write_config(n, args.shapes)
    measure(
        config,
        args.targets,
        args.shapes,
        n,
        args.repeat,
        args.reladiff,
        deadline,
        warm_up=not args.no_warm_up,
    )


if __name__ == "__main__":
    main()
