"""The PostgreSQL dialect of the digest queries, and the one-scan day-and-slot query (no I/O).

The queries themselves are stores.sql.dialect's; this module gives PostgreSQL's spellings
(casts with ::, $n parameters, FILTER, date_trunc with a zone, date_bin, bit(64)) and the
first pass only PostgreSQL's grouping sets can answer in one scan.
"""

from __future__ import annotations

from driftgauge.config.frozen import View
from driftgauge.core.fields import RowHashName, TimestampPrecision
from driftgauge.encoding import iblt
from driftgauge.stores.sql.dialect import SqlDialect, spelling

ROW_HASHES: dict[RowHashName, str] = {
    "md5": "('x' || left(md5({0}), 16))::bit(64)::bigint",
    "lookup3": 'hashtextextended(({0}) COLLATE "C", 0)',
}
"""md5: its first 8 bytes, big-endian, as a signed bigint (same bits). lookup3: the hash
of the text's bytes (hash partitioning's, so stable across releases); the "C" collation
keeps a nondeterministic default collation from hashing a sort key instead."""
SIGNED64 = (
    "((({0}) % 18446744073709551616 + 27670116110564327424) % 18446744073709551616"
    " - 9223372036854775808)::bigint"
)
"""A numeric sum of bigints mod 2^64, as the signed bigint with the same bits.

A bigint decodes far cheaper than a numeric on the client, which matters once a query
returns a row per slot rather than per day.
"""

FAST_SPAN = ("1970-01-01 00:00:00+00", "2038-01-19 00:00:00+00")
"""Where date_part('epoch') * 1e6 cast to bigint is the exact microsecond, at half the cost.

PostgreSQL divides the integer microseconds since 1970 by 1e6 in float8. Within these
bounds the seconds stay under 2^31, so that rounding errs at most 2^-23 s (0.12 us), and
the product under 2^51, so its rounding errs at most 0.125 us: 0.24 us in all, under the
half microsecond the cast rounds away. tests/integration check it against the exact form
across the span and its edges.
"""


class PostgresDialect(SqlDialect):
    """PostgreSQL's spellings of the shared queries."""

    name = "postgres"
    no_rule = "NULL::int"
    row_hashes = ROW_HASHES

    def param(self, n: int, type_: str | None = None) -> str:
        """Return `$n`, cast with `::type_` when given."""
        return f"${n}" if type_ is None else f"${n}::{type_}"

    text = spelling("({0})::text", "Return `expr` as text.")

    bigint = spelling("({0})::bigint", "Return `expr` as a bigint.")

    decimal_text = spelling(
        "trim_scale(({0})::numeric)::text",
        "Return a numeric's text without trailing zeros (trim_scale).",
    )

    measure = spelling(
        "({0})::numeric",
        "Return a measure column as numeric (exact; its sum never overflows).",
    )

    boolean = spelling("({0})::boolean", "Return `expr` as a boolean.")

    instant = spelling(
        "({0})::timestamptz",
        "Return `expr` as timestamptz (the session runs in UTC).",
    )

    def epoch_micros(self, col: str, precision: TimestampPrecision) -> str:
        """Return epoch microseconds, exact over PostgreSQL's whole range, without numerics.

        extract(epoch) is a numeric, whose arithmetic cost 0.9 s per 1M rows. Between
        FAST_SPAN's bounds the float date_part('epoch') rounds back to the exact integer
        (see FAST_SPAN); outside them the float parts are exact integers (the minute's
        epoch seconds, the microseconds in it) joined in bigint. The session runs in UTC,
        so a minute starts on a whole minute of the instant.
        """
        t = self.instant(col)
        fast = f"(date_part('epoch', {t}) * 1000000)::bigint"
        micros = f"date_part('microseconds', {t})::bigint"
        if precision == "ms":
            # Both forms are >= 0 where they floor: the fast one only after 1970.
            fast = f"({fast} / 1000 * 1000)"
            micros = f"({micros} / 1000 * 1000)"
        whole = f"(date_part('epoch', date_trunc('minute', {t}))::bigint * 1000000 + {micros})"
        lo, hi = FAST_SPAN
        return (
            f"(CASE WHEN {t} >= '{lo}'::timestamptz AND {t} < '{hi}'::timestamptz "
            f"THEN {fast} ELSE {whole} END)"
        )

    def filtered(self, func: str, arg: str, where: str, *, distinct: bool = False) -> str:
        """Return the aggregate with a FILTER clause."""
        return f"{func}({'DISTINCT ' if distinct else ''}{arg}) FILTER (WHERE {where})"

    text_key = spelling(
        '(({0})::text COLLATE "C")', 'Return a key column as text under the bytewise "C" collation.'
    )
    bytewise = spelling(
        '(({0}) COLLATE "C")', 'Return the text under the "C" collation: compared as bytes.'
    )
    prefix_in = spelling("{0} LIKE ANY({1})", "Return `khash LIKE ANY(patterns)`.")
    bucket = spelling(
        "date_trunc($3, {0}, $4)", "Return the local day or hour of `t` in the zone named by $4."
    )
    slot = spelling(
        "date_bin($3::interval, {0}, $4::timestamptz)",
        "Return date_bin($3, t, $4): it works on the absolute instant, across DST too.",
    )

    def ranges_sql(self, t: str, first: int, count: int) -> str:
        """Return one OR branch per sub-range, the bounds from two timestamptz[] parameters.

        Not a join on unnest(): with the bounds known at planning time each branch
        becomes a bitmap scan of a time index, where the join reads the whole window.
        """
        if count < 1:
            raise ValueError("ranges_sql needs at least one sub-range")
        lo, hi = self.param(first, "timestamptz[]"), self.param(first + 1, "timestamptz[]")
        branches = " OR ".join(
            f"({t} >= ({lo})[{i}] AND {t} < ({hi})[{i}])" for i in range(1, count + 1)
        )
        return f" AND ({branches})"

    def points_sql(self, t: str, first: int) -> str | None:
        """Return `t = ANY($first)`: an index scan probes each instant.

        A peel names thousands of one-microsecond spans on a dense day; as OR branches
        their planning grows with the square of their number (1,024 took 6.7 s), where
        the array of instants costs tens of milliseconds.
        """
        return f" AND {t} = ANY({self.param(first, 'timestamptz[]')})"

    def day_slot_sql(self, view: View) -> str:
        """Return day buckets by rule plus per-slot expected aggregates from one scan.

        $3 is the slot interval, $4 the time zone name, $5 the slots' origin. Rows with a
        NULL slot are the day set (one per day and rule); the others are the (day, slot)
        aggregates of rows no rule excludes. The row hash is computed once per row, below
        an OFFSET 0 fence, so the one sort both nested grouping sets share carries a
        bigint, not the row encoding; that is what makes this cheaper than a day query
        plus a slot query.
        """
        # Measure totals for the day rows only: first-pass slots are compared by count and digest.
        return (
            "SELECT r.d AS bucket, r.s AS slot, r.x AS rule, count(*) AS n, "
            f"{self.distinct_keys_sql('r.x IS NULL')} AS keys, "
            f"{SIGNED64.format(self.kept(view, 'sum', 'r.h'))} AS digest"
            f"{self.measure_sums_sql(view, only='GROUPING(r.s) = 1')} "
            "FROM (SELECT date_trunc('day', b.t, $4) AS d, "
            "date_bin($3::interval, b.t, $5::timestamptz) AS s, b.x, b.kd, "
            f"{self.row_hash(view, 'b.renc')} AS h"
            f"{self.carried(view, 'b')} "
            f"FROM ({self.base_sql(view)}) AS b OFFSET 0) AS r "
            "GROUP BY GROUPING SETS ((1, 3), (1, 3, 2)) "
            "HAVING r.x IS NULL OR GROUPING(r.s) = 1"
        )

    def day_cell_sql(self, view: View) -> str:
        """Return day buckets by rule plus each day's difference-digest cells from one scan.

        $3 is the cells per sub-table, $4 the time zone name. Rows with a NULL cell are
        the day set (as bucket_sql gives it, but keys NULL: see day_keys_sql); the others
        are the (day, cell) sums over the rows no rule excludes, as encoding.iblt.build
        computes them. One hash aggregate holds K + 1 grouping sets, the day's and one a
        sub-table, so each row is hashed once and read once: a materialized CTE scanned
        K + 1 times cost 1.7x this at 10M rows. A distinct count would force sorts, so
        keys come from day_keys_sql; the caller plans without sorts (SET enable_sort).
        """
        m = iblt.MASK32
        p = f"(((b.h & {m}) * {iblt.C1}) # (((b.h >> 32) & {m}) * {iblt.C2}))"
        q = f"({p} # ({p} >> 29))"
        check = f"((({q} & {m}) * {iblt.C3}) # (({q} >> 32) * {iblt.C4}))"
        # An excluded row has no row hash, so no cell: its NULL-cell groups are dropped.
        h = self.row_hash(view, "r.renc")
        if view.sql_rules:
            h = f"CASE WHEN r.x IS NULL THEN {h} END"
        cells = "".join(
            f", {j} * $3::bigint + ((b.h >> {iblt.POSITION_BITS * j}) & {iblt.POSITION_MASK})"
            f" % $3::bigint AS c{j}"
            for j in range(iblt.K)
        )
        named = ", ".join(f"c{j}" for j in range(iblt.K))
        sets = ", ".join(f"(b.d, c{j})" for j in range(iblt.K))
        return (
            f"SELECT b.d AS bucket, b.x AS rule, coalesce({named}) AS cell, count(*) AS n, "
            f"{SIGNED64.format('sum(b.h)')} AS digest, {SIGNED64.format('sum(b.c)')} AS checks, "
            f"{SIGNED64.format('sum(b.us)')} AS times{self.measure_sums_sql(view, 'b')} "
            f"FROM (SELECT b.*, {check} AS c{cells} "
            "FROM (SELECT date_trunc('day', r.t, $4) AS d, r.x, "
            f"{h} AS h, "
            f"{self.epoch_micros('r.t', 'us')} AS us{self.carried(view, 'r')} "
            f"FROM ({self.base_sql(view)}) AS r OFFSET 0) AS b) AS b "
            f"GROUP BY GROUPING SETS ((b.d, b.x), {sets}) "
            f"HAVING GROUPING(b.x) = 0 OR coalesce({named}) IS NOT NULL"
        )

    def day_keys_sql(self, view: View) -> str:
        """Return each day's distinct-key count of the rows no rule excludes; $3 the zone."""
        return (
            f"SELECT date_trunc('day', r.t, $3) AS bucket, "
            f"{self.distinct_keys_sql('true')} AS keys "
            f"FROM ({self.base_sql(view)}) AS r WHERE r.x IS NULL GROUP BY 1"
        )


POSTGRES = PostgresDialect()
