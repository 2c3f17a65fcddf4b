"""Write a small shop database and its Parquet export with planted drift, then check them.

Run by `make try`: needs only the Python package (DuckDB is embedded), no service.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb

from driftgauge.cli.common import EXIT_DRIFT

US = timedelta(microseconds=1)
HERE = Path(__file__).parent
BERLIN = ZoneInfo("Europe/Berlin")
DAYS = 3
ORDERS = 3000


def _shop(folder: Path, first: date) -> None:
    conn = duckdb.connect(str(folder / "shop.duckdb"))
    try:
        conn.execute("SET TimeZone = 'UTC'")
        start = datetime(first.year, first.month, first.day, tzinfo=BERLIN).astimezone(UTC)
        step = timedelta(days=DAYS) / ORDERS
        conn.execute(
            "CREATE TABLE orders (order_id VARCHAR, status VARCHAR, "
            "amount DECIMAL(10,2), updated_at TIMESTAMPTZ)"
        )
        conn.execute(
            """
            INSERT INTO orders
            SELECT printf('o%05d', i), ['paid', 'shipped', 'open'][i % 3 + 1],
                   CAST(printf('%d.%02d', i % 500, i % 100) AS DECIMAL(10,2)),
                   make_timestamptz(CAST($1 + i * $2 AS BIGINT))
            FROM range($3) AS r(i)""",
            [(start - datetime(1970, 1, 1, tzinfo=UTC)) // US, step // US, ORDERS],
        )
        # The export job: every order, one folder per Berlin day, except what it got wrong.
        conn.execute("""
            CREATE TABLE export AS
            SELECT * REPLACE (CASE WHEN order_id = 'o01500' THEN 'open' ELSE status END
                              AS status),
                   strftime(timezone('Europe/Berlin', updated_at), '%Y-%m-%d') AS day
            FROM orders WHERE order_id NOT IN ('o00042', 'o02718')
            UNION ALL
            SELECT 'x00001', 'paid', 9.99, updated_at,
                   strftime(timezone('Europe/Berlin', updated_at), '%Y-%m-%d')
            FROM orders WHERE order_id = 'o00100'""")
        conn.execute(f"COPY export TO '{folder / 'export'}' (FORMAT parquet, PARTITION_BY (day))")
        conn.execute("DROP TABLE export")
    finally:
        conn.close()


def main() -> int:
    """Build the files in a temporary folder, run the check there, explain the exit code."""
    folder = Path(tempfile.mkdtemp(prefix="driftgauge-try-"))
    try:
        first = datetime.now(BERLIN).date() - timedelta(days=DAYS + 1)
        last = first + timedelta(days=DAYS - 1)
        _shop(folder, first)
        shutil.copy(HERE / "try.yml", folder / "try.yml")
        print(
            f"{ORDERS} orders in shop.duckdb; their Parquet export misses o00042 and o02718, "
            "has an extra x00001 and a changed status on o01500.\n",
            flush=True,
        )
        driftgauge = Path(sys.executable).with_name("driftgauge")
        code = subprocess.call(
            [
                str(driftgauge),
                "check",
                "orders",
                "--config",
                "try.yml",
                "--no-store",
                "--since",
                first.isoformat(),
                "--until",
                last.isoformat(),
            ],
            cwd=folder,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if code == EXIT_DRIFT:
        print(
            f"\nExit code {code}: drift found, as planted. Next: deploy/examples/*.yml and "
            "docs/configuration.md."
        )
        return 0
    print(f"\nunexpected exit code {code}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
