"""The Trino SQL dialect of the digest queries (no I/O).

The queries are stores.sql.dialect's; this module gives Trino's spellings: md5 over the
UTF-8 bytes (varbinary), the row hash's first 64 bits as a DECIMAL(20,0) (sums are
DECIMAL(38,0), exact; reduced mod 2^64 in Python), local days by at_timezone and slots as
numbers of steps from the origin (stores.sql.engine_dialect). Epoch microseconds are
computed exactly (whole seconds plus the six digits of the fraction), never through
to_unixtime's double. Parameters are
markers the adapter replaces by literals (render): the client sends one statement, no
prepare round trip, and operator SQL is never scanned for placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, ClassVar

from driftgauge.config.frozen import Exclusion
from driftgauge.core.fields import RowHashName
from driftgauge.stores.sql.dialect import spelling
from driftgauge.stores.sql.engine_dialect import EngineDialect

MARK = "\x00"
"""Delimits a parameter marker: no identifier or operator SQL holds a NUL character."""
_MARKER = re.compile(MARK + r"a(\d+)" + MARK)


class TrinoDialect(EngineDialect):
    """Trino's spellings of the shared queries."""

    name = "trino"
    no_rule = "CAST(NULL AS INTEGER)"
    row_hashes: ClassVar[Mapping[RowHashName, str]] = {
        "md5": "CAST(from_big_endian_64(substr(md5(to_utf8({0})), 1, 8)) AS DECIMAL(20,0))"
    }

    def param(self, n: int, type_: str | None = None) -> str:
        """Return the marker of parameter `n` (render puts its literal there)."""
        return f"{MARK}a{n}{MARK}"

    text = spelling("CAST(({0}) AS VARCHAR)", "Return `expr` as VARCHAR.")
    md5 = spelling(
        "lower(to_hex(md5(to_utf8({0}))))", "Return md5 hex of the UTF-8 bytes of a VARCHAR."
    )
    char_length = spelling(
        "CAST(length({0}) AS VARCHAR)", "Return the length in code points, as text."
    )
    instant = spelling(
        "CAST(({0}) AS TIMESTAMP(6) WITH TIME ZONE)",
        "Return `expr` as an instant (a timestamp without zone reads as UTC: the session's).",
    )
    head = spelling("substr({0}, 1, {1})", "Return the first `n` characters (Trino has no left()).")
    trim_trailing = spelling("rtrim({0}, {1})", "Return a text without that character at its end.")
    has_point = spelling("strpos({0}, '.') > 0", "Return whether a text holds a point.")

    def rule_sql(self, ex: Exclusion) -> str:
        """Return an exclusion's condition; a NULL predicate excludes nothing (no IS TRUE)."""
        if ex.where is not None:
            return f"coalesce(({self.verbatim(ex.where)}), false)"
        return super().rule_sql(ex)

    def micros(self, instant: str) -> str:
        """Return exact epoch microseconds of a TIMESTAMP(6) WITH TIME ZONE expression."""
        seconds = f"CAST(to_unixtime(date_trunc('second', {instant})) AS BIGINT)"
        # The text is 'YYYY-MM-DD HH:MM:SS.ffffff UTC': the fraction's digits are 21-26.
        fraction = f"CAST(substr(CAST({instant} AS VARCHAR), 21, 6) AS BIGINT)"
        return f"({seconds} * 1000000 + {fraction})"

    def bucket(self, t: str) -> str:
        """Return the local date of `t` in the zone named by parameter 3."""
        return f"date(at_timezone({t}, {self.param(3)}))"

    def ranges_sql(self, t: str, first: int, count: int) -> str:
        """Return a clause keeping rows in one of the sub-ranges of two array parameters.

        One lambda over the arrays, not an OR branch per range: a few hundred branches
        exceed Trino's compiler limit.
        """
        if count < 1:
            raise ValueError("ranges_sql needs at least one sub-range")
        lo, hi = self.param(first), self.param(first + 1)
        return (
            f" AND any_match(sequence(1, {count}), "
            f"i -> {t} >= element_at({lo}, i) AND {t} < element_at({hi}, i))"
        )

    def render(self, sql: str, args: Sequence[Any]) -> str:
        """Return `sql` with each parameter marker replaced by the literal of its argument."""
        return _MARKER.sub(lambda m: literal(args[int(m.group(1)) - 1]), sql)


def literal(value: Any) -> str:
    """Return the Trino SQL literal of a bound value; TypeError for a type it cannot hold."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"BIGINT '{value}'" if abs(value) >= 2**31 else str(value)
    if isinstance(value, Decimal):
        return f"DECIMAL '{value}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise TypeError("an instant parameter must carry its time zone")
        moment = value.astimezone(UTC)
        return f"TIMESTAMP '{moment:%Y-%m-%d %H:%M:%S.%f} UTC'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, list | tuple):
        return "ARRAY[" + ", ".join(literal(v) for v in value) + "]"
    raise TypeError(f"cannot bind a {type(value).__name__} in Trino SQL")


TRINO = TrinoDialect()
