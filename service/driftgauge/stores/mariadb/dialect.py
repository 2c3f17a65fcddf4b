"""The MariaDB / MySQL dialect of the digest queries, and its one-scan day-and-slot query (no I/O).

The queries are stores.sql.dialect's; this module gives MariaDB's spellings: backtick
quoting, named `%(aN)s` parameters (so operator SQL has its `%` doubled), CONCAT, utf8mb4
text, CONV for the row hash (exact DECIMAL sums, reduced mod 2^64 in Python), local days
by CONVERT_TZ (the caller turns each local date into its UTC midnight) and slots as
numbers of steps from the origin. The driver has no arrays: a list parameter is bound as
a JSON array and as one scalar per element (see bind). Sessions run with time_zone
'+00:00', so DATETIME and TIMESTAMP columns read as UTC.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from driftgauge.config.frozen import View
from driftgauge.core.fields import RowHashName, TimestampPrecision
from driftgauge.stores.sql.dialect import SqlDialect, spelling

EPOCH = "'1970-01-01 00:00:00'"


def naive_utc(moment: datetime) -> datetime:
    """Return an aware instant as the naive UTC datetime a UTC session compares with."""
    if moment.tzinfo is None:
        raise ValueError("time bounds must be timezone-aware")
    return moment.astimezone(UTC).replace(tzinfo=None)


class MariaDBDialect(SqlDialect):
    """MariaDB's spellings of the shared queries."""

    name = "mariadb"
    no_rule = "CAST(NULL AS SIGNED)"
    reserved = frozenset({"keys"})
    quote = "`"
    escapes = (("%", "%%"),)  # the driver's parameter style reads a lone % as a marker
    # md5's first 8 bytes, big-endian, as BIGINT UNSIGNED (sums: exact DECIMAL(65)).
    row_hashes: ClassVar[Mapping[RowHashName, str]] = {
        "md5": "CAST(CONV(LEFT(MD5({0}), 16), 16, 10) AS UNSIGNED)"
    }

    def param(self, n: int, type_: str | None = None) -> str:
        """Return the named parameter `%(aN)s` (bind turns values into what it expects)."""
        return f"%(a{n})s"

    def concat(self, *parts: str) -> str:
        """Return CONCAT(...) as utf8mb4 text (`||` is OR here); md5 sees those bytes."""
        return f"CONVERT(CONCAT({', '.join(parts)}) USING utf8mb4)"

    text = spelling(
        "CONVERT(({0}) USING utf8mb4)",
        "Return `expr` as utf8mb4 text, whatever the column's character set.",
    )
    bigint = spelling("CAST(({0}) AS SIGNED)", "Return `expr` as a signed 64-bit integer.")
    boolean = spelling("(({0}) <> 0)", "Return `expr` as a condition (BOOLEAN is TINYINT here).")
    # Binary, not utf8mb4_bin: the _bin collations are PAD SPACE, so 'b' and 'b ' would
    # count as one key; and never the column's collation, which may fold case or accents.
    bytewise = spelling(
        "CAST(({0}) AS BINARY)", "Return text as bytes: every collation here folds or pads."
    )
    instant = spelling("({0})", "Return the time column as it is: sessions run in UTC.")

    def decimal_text(self, expr: str) -> str:
        """Return the plain text of a DECIMAL without trailing fractional zeros (trim_scale)."""
        raw = f"CAST(({expr}) AS CHAR)"
        trimmed = f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {raw}))"
        text = f"IF(LOCATE('.', {raw}) > 0, {trimmed}, {raw})"
        return f"IF({text} = '-0', '0', {text})"

    def epoch_micros(self, col: str, precision: TimestampPrecision) -> str:
        """Return the epoch microseconds of a UTC DATETIME/TIMESTAMP, floored to `precision`."""
        micros = f"TIMESTAMPDIFF(MICROSECOND, {EPOCH}, ({col}))"
        # FLOOR rounds down before 1970 too, as Python's // does; DIV would round toward zero.
        return micros if precision == "us" else f"CAST(FLOOR({micros} / 1000) * 1000 AS SIGNED)"

    def bucket(self, t: str) -> str:
        """Return the local date of `t` in the zone named by parameter 4 (zone tables)."""
        return f"DATE(CONVERT_TZ({t}, '+00:00', {self.param(4)}))"

    prefix_in = spelling(
        "EXISTS (SELECT 1 FROM JSON_TABLE({1}, '$[*]' COLUMNS "
        "(p VARCHAR(40) PATH '$')) AS lp WHERE {0} LIKE lp.p)",
        "Return whether a key hash matches one of the LIKE patterns of a JSON array parameter.",
    )

    def slot(self, t: str) -> str:
        """Return the slot number of `t`: parameter 3 is the step in µs, 4 the origin."""
        return f"TIMESTAMPDIFF(MICROSECOND, {self.param(4)}, {t}) DIV {self.param(3)}"

    def ranges_sql(self, t: str, first: int, count: int) -> str:
        """Return one OR branch per sub-range, bounds the scalars bind gives each element."""
        if count < 1:
            raise ValueError("ranges_sql needs at least one sub-range")
        lo, hi = f"a{first}", f"a{first + 1}"
        branches = " OR ".join(
            f"({t} >= %({lo}_{i})s AND {t} < %({hi}_{i})s)" for i in range(count)
        )
        return f" AND ({branches})"

    def day_slot_sql(self, view: View) -> str:
        """Return day buckets by rule plus per-slot expected aggregates from one scan.

        Parameters as in slot_sql ($3 the step, $5 the origin) and bucket_sql ($4 the
        zone). MariaDB has no GROUPING SETS: WITH ROLLUP over (day, rule, slot) gives both
        levels, with the rule as 0 for kept rows so a rolled-up NULL is told apart. Rows
        with a NULL slot are the day set (one per day and rule); the others are the (day,
        slot) aggregates of rows no rule excludes.
        """
        sums = "".join(
            f", IF(r.s IS NULL, {self.filtered('sum', f'r.m{i}', 'r.x = 0')}, NULL) AS m{i}"
            for i in range(len(view.measures))
        )
        return (
            "SELECT r.d AS bucket, r.s AS slot, NULLIF(r.x, 0) AS rule, count(*) AS n, "
            f"{self.distinct_keys_sql('r.x = 0')} AS {self.alias('keys')}, "
            f"{self.filtered('sum', 'r.h', 'r.x = 0')} AS digest{sums} "
            f"FROM (SELECT {self.bucket('b.t')} AS d, "
            f"TIMESTAMPDIFF(MICROSECOND, {self.param(5)}, b.t) DIV {self.param(3)} AS s, "
            f"COALESCE(b.x, 0) AS x, b.kd, {self.row_hash(view, 'b.renc')} AS h"
            f"{self.carried(view, 'b')} "
            f"FROM ({self.base_sql(view)}) AS b) AS r "
            "GROUP BY r.d, r.x, r.s WITH ROLLUP "
            "HAVING r.d IS NOT NULL AND r.x IS NOT NULL AND (r.s IS NULL OR r.x = 0)"
        )

    def bind(self, args: Sequence[Any]) -> dict[str, Any]:
        """Return the named parameters of positional `args` (a1, a2, ...).

        An aware datetime becomes naive UTC; a list becomes a JSON array (`aN`) and one
        scalar per element (`aN_0`, `aN_1`, ...), which index range scans need.
        """
        out: dict[str, Any] = {}
        for n, value in enumerate(args, 1):
            if isinstance(value, list):
                items = [naive_utc(v) if isinstance(v, datetime) else v for v in value]
                out[f"a{n}"] = json.dumps([str(v) for v in items])
                out |= {f"a{n}_{i}": v for i, v in enumerate(items)}
            else:
                out[f"a{n}"] = naive_utc(value) if isinstance(value, datetime) else value
        return out


MARIADB = MariaDBDialect()
