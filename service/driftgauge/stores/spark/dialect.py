"""The Spark SQL dialect of the digest queries (no I/O).

The queries are stores.sql.dialect's; this module gives Spark SQL's spellings: backtick
quoting, named `:aN` parameters, md5 over the UTF-8 bytes, the row hash's 64 bits as a
DECIMAL(20,0) (its sums DECIMAL(30,0), exact; reduced mod 2^64 in Python), local days as
dates by from_utc_timestamp (the adapter turns each into its UTC midnight) and slots as
numbers of steps from the origin (stores.sql.engine_dialect). Sessions run with time zone
UTC, so a TIMESTAMP_NTZ or DATE column reads as UTC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from driftgauge.config.frozen import View
from driftgauge.core.fields import RowHashName
from driftgauge.stores.sql.dialect import spelling
from driftgauge.stores.sql.engine_dialect import EngineDialect


class SparkDialect(EngineDialect):
    """Spark SQL's spellings of the shared queries."""

    name = "spark"
    no_rule = "CAST(NULL AS INT)"
    reserved = frozenset({"keys"})
    quote = "`"
    division = "DIV"
    any_match = "exists"
    # md5's first 8 bytes, big-endian, as an unsigned integer in a DECIMAL(20,0).
    row_hashes: ClassVar[Mapping[RowHashName, str]] = {
        "md5": "CAST(conv(substr({0}, 1, 16), 16, 10) AS DECIMAL(20,0))"
    }

    def row_hash(self, view: View, renc: str) -> str:
        """Return the row hash of row encoding `renc` (md5 of its bytes first)."""
        return super().row_hash(view, self.md5(renc))

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
    micros = spelling("unix_micros({0})", "Return epoch microseconds of a TIMESTAMP.")
    pmod = spelling("pmod({0}, {1})", "Return the first modulo the second, never negative.")
    bytewise = spelling(
        "(CAST(({0}) AS STRING) COLLATE UTF8_BINARY)",
        "Return text compared byte by byte, whatever collation the column has.",
    )
    text_key = bytewise
    has_point = spelling("instr({0}, '.') > 0", "Return whether a text holds a point.")
    bucket = spelling(
        "to_date(from_utc_timestamp({0}, :a3))", "Return the local date of `t` in the zone :a3."
    )

    def ranges_sql(self, t: str, first: int, count: int) -> str:
        """Return one OR branch per sub-range, each bound a scalar parameter (see bind)."""
        if count < 1:
            raise ValueError("ranges_sql needs at least one sub-range")
        branches = " OR ".join(
            f"({t} >= :a{first}_{i} AND {t} < :a{first + 1}_{i})" for i in range(count)
        )
        return f" AND ({branches})"

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
