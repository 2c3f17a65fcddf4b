"""The spellings the distributed engines' dialects share (Spark, Trino), no I/O.

Both compute epoch microseconds, number slots in whole steps from an origin, answer the
one-scan day and slot query with GROUPING SETS and export each row's time as epoch
microseconds (never as a datetime the client would shift into its own zone). A kind
spells `micros`, `pmod`, the integer division and the text functions decimal_text uses.
"""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.core.fields import TimestampPrecision
from driftgauge.stores.sql.dialect import SqlDialect, spelling


class EngineDialect(SqlDialect):
    """A dialect whose engine counts time in epoch microseconds and has grouping sets."""

    division = "/"
    """The operator dividing one BIGINT by another into a whole number."""
    any_match = "any_match"
    """The function telling whether a lambda holds for any element of an array."""
    pmod = spelling("(({0} % {1}) + {1}) % {1}", "Return the first modulo the second, >= 0.")
    trim_trailing = spelling(
        "TRIM(TRAILING {1} FROM {0})",
        "Return a text without the repeats of a one-character literal at its end.",
    )

    def micros(self, instant: str) -> str:
        """Return exact epoch microseconds of an instant expression."""
        raise NotImplementedError

    def has_point(self, expr: str) -> str:
        """Return whether a text holds a decimal point."""
        raise NotImplementedError

    def prefix_in(self, khash: str, param: str) -> str:
        """Return whether `khash` matches one of the LIKE patterns of an array parameter."""
        return f"{self.any_match}({param}, p -> {khash} LIKE p)"

    def decimal_text(self, expr: str) -> str:
        """Return a DECIMAL's or integer's plain text with trailing fractional zeros trimmed."""
        raw = self.text(expr)
        trimmed = self.trim_trailing(self.trim_trailing(raw, "'0'"), "'.'")
        text = f"(CASE WHEN {self.has_point(raw)} THEN {trimmed} ELSE {raw} END)"
        return f"(CASE WHEN {text} = '-0' THEN '0' ELSE {text} END)"

    def epoch_micros(self, col: str, precision: TimestampPrecision) -> str:
        """Return epoch microseconds of the column, floored to `precision` (before 1970 too)."""
        micros = self.micros(self.instant(col))
        return micros if precision == "us" else f"({micros} - {self.pmod(micros, '1000')})"

    def steps(self, t: str, step: str, origin: str) -> str:
        """Return how many whole `step`s time `t` lies after `origin` (both in µs)."""
        return f"({self.micros(t)} - {origin}) {self.division} {step}"

    def slot(self, t: str) -> str:
        """Return the slot number of `t`: parameter 3 the step in µs, 4 the origin in µs."""
        return f"({self.steps(t, self.param(3), self.param(4))})"

    def rows_sql(
        self, view: View, *, within: bool, ranges: int | None = None, points: bool = False
    ) -> str:
        """Return the shared export query with its time as epoch microseconds."""
        inner = super().rows_sql(view, within=within, ranges=ranges, points=points)
        return f"SELECT e.ktext, e.khash, e.rhash, {self.micros('e.t')} AS t FROM ({inner}) AS e"

    def day_slot_sql(self, view: View) -> str:
        """Return day buckets by rule plus per-slot expected aggregates from one scan.

        $3 names the zone (as in bucket_sql), $4 is the slot step and $5 the origin (µs).
        Rows with a NULL slot are the day set (one per day and rule); the others are the
        (day, slot) aggregates of rows no rule excludes, slots numbered from the origin.
        """
        day_sums = self.measure_sums_sql(view, only="GROUPING(r.s) = 1")
        # Spark's HAVING cannot name a grouped column by its alias: filter outside instead.
        return (
            "SELECT * FROM (SELECT r.d AS bucket, r.s AS slot, r.x AS rule, count(*) AS n, "
            f"{self.distinct_keys_sql('r.x IS NULL')} AS {self.alias('keys')}, "
            f"{self.kept(view, 'sum', 'r.h')} AS digest{day_sums}, GROUPING(r.s) AS day_set "
            f"FROM (SELECT {self.bucket('b.t')} AS d, "
            f"{self.steps('b.t', self.param(4), self.param(5))} AS s, b.x, b.kd, "
            f"{self.row_hash(view, 'b.renc')} AS h{self.carried(view, 'b')} "
            f"FROM ({self.base_sql(view)}) AS b) AS r "
            "GROUP BY GROUPING SETS ((r.d, r.x), (r.d, r.x, r.s))) AS g "
            "WHERE g.rule IS NULL OR g.day_set = 1"
        )
