"""The Spark SQL dialect of the digest queries (no I/O).

The queries are stores.sql.dialect's; this module gives Spark SQL's spellings: backtick
quoting, named `:aN` parameters, md5 over the UTF-8 bytes, the row hash's 64 bits as a
DECIMAL(20,0) (its sums DECIMAL(30,0), exact; reduced mod 2^64 in Python), local days as
dates by from_utc_timestamp (the adapter turns each into its UTC midnight) and slots as
numbers of steps from the origin. Times come back as epoch microseconds, never as
datetimes the client would shift into its own zone. Sessions run with time zone UTC, so
a TIMESTAMP_NTZ or DATE column reads as UTC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from driftgauge.config.frozen import View
from driftgauge.core.fields import RowHashName, TimestampPrecision
from driftgauge.stores.sql.dialect import SqlDialect, spelling


class SparkDialect(SqlDialect):
    """Spark SQL's spellings of the shared queries."""

    name = "spark"
    no_rule = "CAST(NULL AS INT)"
    reserved = frozenset({"keys"})
    # md5's first 8 bytes, big-endian, as an unsigned integer in a DECIMAL(20,0).
    row_hashes: ClassVar[Mapping[RowHashName, str]] = {
        "md5": "CAST(conv(substr({0}, 1, 16), 16, 10) AS DECIMAL(20,0))"
    }

    def row_hash(self, view: View, renc: str) -> str:
        """Return the row hash of row encoding `renc` (md5 of its bytes first)."""
        return super().row_hash(view, self.md5(renc))

    def quote_ident(self, name: str) -> str:
        """Return an identifier quoted with backticks so any name is taken literally."""
        if not name or "\x00" in name:
            raise ValueError(f"invalid identifier {name!r}")
        return "`" + name.replace("`", "``") + "`"

    def param(self, n: int, type_: str | None = None) -> str:
        """Return the named parameter `:aN` (the client binds it as a typed literal)."""
        return f":a{n}"

    text = spelling("CAST(({0}) AS STRING)", "Return `expr` as STRING.")
    md5 = spelling("md5(CAST(({0}) AS BINARY))", "Return md5 hex of the UTF-8 bytes of a STRING.")
    char_length = spelling(
        "CAST(char_length({0}) AS STRING)",
        "Return the length in code points, as text (ANSI mode concatenates only strings).",
    )
    instant = spelling("CAST(({0}) AS TIMESTAMP)", "Return `expr` as TIMESTAMP (session: UTC).")
    measure = spelling(
        "({0})", "Return a measure as it is: the sum of a DECIMAL keeps its scale, exact."
    )
    bytewise = spelling(
        "(CAST(({0}) AS STRING) COLLATE UTF8_BINARY)",
        "Return text compared byte by byte, whatever collation the column has.",
    )

    def decimal_text(self, expr: str) -> str:
        """Return a DECIMAL's or integer's plain text with trailing fractional zeros trimmed."""
        raw = self.text(expr)
        trimmed = f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {raw}))"
        text = f"(CASE WHEN instr({raw}, '.') > 0 THEN {trimmed} ELSE {raw} END)"
        return f"(CASE WHEN {text} = '-0' THEN '0' ELSE {text} END)"

    def epoch_micros(self, col: str, precision: TimestampPrecision) -> str:
        """Return epoch microseconds of the column, floored to `precision` (before 1970 too)."""
        micros = f"unix_micros({self.instant(col)})"
        return micros if precision == "us" else f"({micros} - pmod({micros}, 1000))"

    def key_distinct(self, view: View) -> str:
        """Return the key as BIGINT, or as text compared bytewise."""
        col = self.quote_ident(view.key_column)
        if view.key_type == "integer":
            return f"({self.bigint(col)})"
        return str(self.bytewise(col))

    def prefix_in(self, khash: str, param: str) -> str:
        """Return whether `khash` matches one of the LIKE patterns of an array parameter."""
        return f"exists({param}, p -> {khash} LIKE p)"

    def bucket(self, t: str) -> str:
        """Return the local date of `t` in the zone named by parameter 3."""
        return f"to_date(from_utc_timestamp({t}, {self.param(3)}))"

    def slot(self, t: str) -> str:
        """Return the slot number of `t`: parameter 3 the step in µs, 4 the origin in µs."""
        return f"((unix_micros({t}) - {self.param(4)}) DIV {self.param(3)})"

    def ranges_sql(self, t: str, first: int, count: int) -> str:
        """Return one OR branch per sub-range, each bound a scalar parameter (see bind)."""
        if count < 1:
            raise ValueError("ranges_sql needs at least one sub-range")
        branches = " OR ".join(
            f"({t} >= :a{first}_{i} AND {t} < :a{first + 1}_{i})" for i in range(count)
        )
        return f" AND ({branches})"

    def rows_sql(
        self, view: View, *, within: bool, ranges: int | None = None, points: bool = False
    ) -> str:
        """Return the shared export query with its time as epoch microseconds."""
        inner = super().rows_sql(view, within=within, ranges=ranges, points=points)
        return f"SELECT e.ktext, e.khash, e.rhash, unix_micros(e.t) AS t FROM ({inner}) AS e"

    def day_slot_sql(self, view: View) -> str:
        """Return day buckets by rule plus per-slot expected aggregates from one scan.

        $3 names the zone (as in bucket_sql), $4 is the slot step and $5 the origin (µs).
        Rows with a NULL slot are the day set (one per day and rule); the others are the
        (day, slot) aggregates of rows no rule excludes, slots numbered from the origin.
        """
        measures = "".join(f", b.m{i}" for i in range(len(view.measures)))
        day_sums = "".join(
            f", CASE WHEN GROUPING(r.s) = 1 THEN {self.kept(view, 'sum', f'r.m{i}')} END AS m{i}"
            for i in range(len(view.measures))
        )
        # HAVING cannot name a grouped column by its alias here: filter outside instead.
        return (
            "SELECT * FROM (SELECT r.d AS bucket, r.s AS slot, r.x AS rule, count(*) AS n, "
            f"{self.distinct_keys_sql('r.x IS NULL')} AS {self.alias('keys')}, "
            f"{self.kept(view, 'sum', 'r.h')} AS digest{day_sums}, GROUPING(r.s) AS day_set "
            f"FROM (SELECT {self.bucket('b.t')} AS d, "
            f"(unix_micros(b.t) - {self.param(5)}) DIV {self.param(4)} AS s, b.x, b.kd, "
            f"{self.row_hash(view, 'b.renc')} AS h{measures} "
            f"FROM ({self.base_sql(view)}) AS b) AS r "
            "GROUP BY GROUPING SETS ((r.d, r.x), (r.d, r.x, r.s))) AS g "
            "WHERE g.rule IS NULL OR g.day_set = 1"
        )

    def bind(self, args: Sequence[Any]) -> dict[str, Any]:
        """Return the named parameters of positional `args` (a1, a2, ...).

        A list of times is bound as one scalar per element (`aN_0`, ...) for ranges_sql;
        any other list as an array.
        """
        out: dict[str, Any] = {}
        for n, value in enumerate(args, 1):
            out[f"a{n}"] = value
            if isinstance(value, list) and value and not isinstance(value[0], str):
                del out[f"a{n}"]
                out |= {f"a{n}_{i}": v for i, v in enumerate(value)}
        return out


SPARK = SparkDialect()
