"""The DuckDB dialect of the digest queries (no I/O).

The queries are stores.sql.dialect's; this module gives DuckDB's spellings: `$n`
parameters, md5 hex to UBIGINT, HUGEINT sums (exact; reduced mod 2^64 in Python), slots
in epoch microseconds, and day buckets by an ASOF join on day starts computed in Python
from zoneinfo, so a day means what driftgauge.core.buckets says on every DST change
whatever tz database the engine carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from driftgauge.config.frozen import View
from driftgauge.core.fields import RowHashName, TimestampPrecision
from driftgauge.stores.duckdb.settings import DuckDBStore
from driftgauge.stores.sql.dialect import SqlDialect, spelling


class DuckDBDialect(SqlDialect):
    """DuckDB's spellings of the shared queries."""

    name = "duckdb"
    no_rule = "CAST(NULL AS INTEGER)"
    # md5's first 8 bytes, big-endian, as a UBIGINT (sums: HUGEINT). DuckDB's own hash()
    # is not lookup3 and may change between releases, so md5 is its only row hash.
    row_hashes: ClassVar[Mapping[RowHashName, str]] = {
        "md5": "CAST('0x' || left(md5({0}), 16) AS UBIGINT)"
    }

    def param(self, n: int, type_: str | None = None) -> str:
        """Return `$n`, cast to `type_` when given."""
        if type_ is None:
            return f"${n}"
        return f"CAST(${n} AS {type_.replace('text[]', 'VARCHAR[]')})"

    text = spelling("CAST(({0}) AS VARCHAR)", "Return `expr` as VARCHAR.")

    def decimal_text(self, expr: str) -> str:
        """Return a DECIMAL's or integer's text with trailing zeros after the point trimmed."""
        s = self.text(expr)
        return f"(CASE WHEN contains({s}, '.') THEN rtrim(rtrim({s}, '0'), '.') ELSE {s} END)"

    char_length = spelling(
        "length({0})",
        "Return the length in code points (DuckDB's length() counts them).",
    )

    instant = spelling(
        "CAST(({0}) AS TIMESTAMPTZ)",
        "Return `expr` as TIMESTAMPTZ (the connection runs in UTC).",
    )

    def epoch_micros(self, col: str, precision: TimestampPrecision) -> str:
        """Return epoch microseconds of the raw column: epoch_us floors nanoseconds too."""
        micros = f"epoch_us({col})"
        if precision == "us":
            return micros
        # % takes the dividend's sign; this floors before 1970 as well.
        return f"({micros} - (({micros} % 1000) + 1000) % 1000)"

    def filtered(self, func: str, arg: str, where: str, *, distinct: bool = False) -> str:
        """Return the aggregate with a FILTER clause.

        A sum of UBIGINT row hashes is a HUGEINT, exact; a DECIMAL measure's sum keeps its
        scale. No cast here: one to HUGEINT would truncate a measure's fractions.
        """
        return f"{func}({'DISTINCT ' if distinct else ''}{arg}) FILTER (WHERE {where})"

    prefix_in = spelling(
        "(len(list_filter({1}, lambda p: {0} LIKE p)) > 0)",
        "Return whether a key hash matches one of the LIKE patterns of a list parameter.",
    )
    slot = spelling(
        "make_timestamptz($4 + (epoch_us({0}) - $4) // $3 * $3)",
        "Return the slot start in epoch microseconds: $3 the step, $4 the origin (both µs).",
    )

    def bucket(self, t: str) -> str:
        """Return the day start of the ASOF-joined day table (see bucket_sql)."""
        return "d.lo"

    def ranges_sql(self, t: str, first: int, count: int) -> str:
        """Return one OR branch per sub-range, bounds from two TIMESTAMPTZ[] parameters."""
        if count < 1:
            raise ValueError("ranges_sql needs at least one sub-range")
        lo = self.param(first, "TIMESTAMPTZ[]")
        hi = self.param(first + 1, "TIMESTAMPTZ[]")
        branches = " OR ".join(
            f"({t} >= {lo}[{i}] AND {t} < {hi}[{i}])" for i in range(1, count + 1)
        )
        return f" AND ({branches})"

    def bucket_sql(self, view: View) -> str:
        """Return the per-day query; $3 holds the UTC starts of the window's local days.

        Each row joins the last day start at or before its time (ASOF): exactly the day
        bucket of core.buckets, since the starts come from it.
        """
        sum_ = self.kept(view, "sum", self.row_hash(view, "r.renc"))
        return (
            f"SELECT d.lo AS bucket, r.x AS rule, count(*) AS n, "
            f"{self.distinct_keys_sql('r.x IS NULL')} AS keys, {sum_} AS digest"
            f"{self.measure_sums_sql(view)} "
            f"FROM ({self.base_sql(view)}) AS r "
            f"ASOF JOIN (SELECT unnest({self.param(3, 'TIMESTAMPTZ[]')}) AS lo) AS d "
            "ON r.t >= d.lo GROUP BY 1, 2 ORDER BY 1, 2"
        )

    def day_slot_sql(self, view: View) -> str:
        """Return day buckets by rule plus per-slot expected aggregates from one scan.

        $3 holds the day starts (as in bucket_sql), $4 the slot step and $5 the slots'
        origin in epoch microseconds. Rows with a NULL slot are the day set (one per day
        and rule); the others are the (day, slot) aggregates of rows no rule excludes, so
        a slot that straddles midnight is cut in two, as on PostgreSQL.
        """
        day_sums = self.measure_sums_sql(view, only="GROUPING(r.s) = 1")
        return (
            "SELECT r.d AS bucket, r.s AS slot, r.x AS rule, count(*) AS n, "
            f"{self.distinct_keys_sql('r.x IS NULL')} AS keys, "
            f"{self.kept(view, 'sum', 'r.h')} AS digest{day_sums} "
            "FROM (SELECT d.lo AS d, make_timestamptz($5 + (epoch_us(b.t) - $5) // $4 * $4) "
            f"AS s, b.x, b.kd, {self.row_hash(view, 'b.renc')} AS h{self.carried(view, 'b')} "
            f"FROM ({self.base_sql(view)}) AS b "
            f"ASOF JOIN (SELECT unnest({self.param(3, 'TIMESTAMPTZ[]')}) AS lo) AS d "
            "ON b.t >= d.lo) AS r "
            "GROUP BY GROUPING SETS ((r.d, r.x), (r.d, r.x, r.s)) "
            "HAVING r.x IS NULL OR GROUPING(r.s) = 1"
        )

    def relation(self, view: View) -> str:
        """Return the FROM item; a `files` table of the store is its reader function."""
        store = view.store
        files = store.file_table(view.table) if isinstance(store, DuckDBStore) else None
        if view.query is None and files is not None:
            return f"{files.reader()} AS src"
        return super().relation(view)


DUCKDB = DuckDBDialect()
