"""SQL for the canonical encoding and the digest queries on PostgreSQL (no I/O).

Every identifier from config is quoted; every value is a bind parameter. Exclusion
predicates and a view's `query` are SQL written by the operator and go in verbatim.
"""

from __future__ import annotations

from driftgauge.config.runtime import View
from driftgauge.core.fields import FieldType, TimestampPrecision

ROW_HASH = "('x' || left(md5(renc), 16))::bit(64)::bigint"
"""The first 8 bytes of md5(row encoding), big-endian, as a signed bigint (same bits)."""


SIGNED64 = ("((({0}) % 18446744073709551616 + 27670116110564327424) % 18446744073709551616"
            " - 9223372036854775808)::bigint")
"""A numeric sum of bigints mod 2^64, as the signed bigint with the same bits.

A bigint decodes far cheaper than a numeric on the client, which matters once a query
returns a row per slot rather than per day.
"""


def quote_ident(name: str) -> str:
    """Return a SQL identifier quoted so any name (case, spaces, quotes) is taken literally."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid identifier {name!r}")
    return '"' + name.replace('"', '""') + '"'


def relation(view: View) -> str:
    """Return the FROM item of a view: its query as a subquery, or its quoted table."""
    if view.query is not None:
        return f"({view.query.strip().rstrip(';')}) AS src"
    if view.table is None:
        raise ValueError("a postgres view needs a query or a table")
    return ".".join(quote_ident(part) for part in view.table.split(".")) + " AS src"


def token_sql(column: str, type_: FieldType, precision: TimestampPrecision = "us") -> str:
    """Return a SQL expression of a column's canonical token (see docs/digest.md)."""
    col = quote_ident(column)
    if type_ == "string":
        enc = f"'S' || char_length(({col})::text) || ':' || ({col})::text"
    elif type_ == "integer":
        enc = f"'I' || (({col})::bigint)::text || ';'"
    elif type_ == "decimal":
        enc = f"'D' || trim_scale(({col})::numeric)::text || ';'"
    elif type_ == "boolean":
        enc = f"CASE WHEN ({col})::boolean THEN 'T' ELSE 'F' END"
    elif type_ == "timestamp":
        # The session runs in UTC, so a timestamp without time zone is read as UTC.
        enc = f"'M' || ({_epoch_micros_sql(col, precision)})::text || ';'"
    else:
        raise ValueError(f"unknown field type {type_!r}")
    return f"(CASE WHEN ({col}) IS NULL THEN 'N' ELSE {enc} END)"


def _epoch_micros_sql(col: str, precision: TimestampPrecision) -> str:
    # extract(epoch) is an exact numeric; floor() rounds down before 1970 too, as Python's //.
    seconds = f"extract(epoch FROM ({col})::timestamptz)"
    if precision == "us":
        return f"({seconds} * 1000000)::bigint"
    return f"(floor({seconds} * 1000) * 1000)::bigint"


def key_text_sql(view: View) -> str:
    """Return a SQL expression of the key's canonical text."""
    col = quote_ident(view.key_column)
    if view.key_type == "integer":
        return f"(({col})::bigint)::text"
    return f"({col})::text"


def key_encoding_sql(view: View) -> str:
    """Return a SQL expression of the key encoding."""
    return token_sql(view.key_column, view.key_type)


def row_encoding_sql(view: View) -> str:
    """Return a SQL expression of the row encoding: key token then each field's token."""
    parts = [key_encoding_sql(view)]
    parts += [token_sql(col, f.type, view.timestamp_precision)
              for col, f in zip(view.columns, view.fields, strict=True)]
    return " || ".join(parts)


def exclusion_sql(view: View) -> str:
    """Return the 1-based index of the first exclusion rule a row matches, else NULL."""
    rules = [ex for ex in view.exclusions if ex.where is not None]
    if not rules:
        return "NULL::int"
    whens = " ".join(f"WHEN ({ex.where}) IS TRUE THEN {i}" for i, ex in enumerate(rules, 1))
    return f"CASE {whens} END"


def base_sql(view: View, *, ranges: tuple[int, int] | None = None) -> str:
    """Return the rows in [$1, $2) with exclusion index, event time, key text and encodings.

    With `ranges` = (n, count), only rows inside one of `count` sub-ranges are kept,
    their starts and ends given as the timestamptz[] parameters $n and $n+1.
    """
    t = quote_ident(view.time_column)
    return (
        f"SELECT {exclusion_sql(view)} AS x, ({t})::timestamptz AS t, "
        f"{key_text_sql(view)} AS ktext, {key_encoding_sql(view)} AS kenc, "
        f"{key_distinct_sql(view)} AS kd, {row_encoding_sql(view)} AS renc "
        f"FROM {relation(view)} "
        f"WHERE {t} >= $1::timestamptz AND {t} < $2::timestamptz"
        f"{'' if ranges is None else ranges_sql(t, *ranges)}"
    )


def key_distinct_sql(view: View) -> str:
    """Return the key as a value whose equality is the key encoding's, cheap to sort.

    Counting distinct raw keys (bigint, or text under the bytewise "C" collation) gives
    the same number as distinct encodings without building and sorting the encodings.
    """
    col = quote_ident(view.key_column)
    if view.key_type == "integer":
        return f"(({col})::bigint)"
    return f"(({col})::text COLLATE \"C\")"


def distinct_keys_sql(where: str) -> str:
    """Return the distinct-key count of the rows matching `where` (a NULL key counts once)."""
    return (f"(count(DISTINCT r.kd) FILTER (WHERE {where}) + "
            f"coalesce(max(CASE WHEN r.kd IS NULL THEN 1 END) FILTER (WHERE {where}), 0))")


def ranges_sql(t: str, first: int, count: int) -> str:
    """Return an AND clause keeping rows whose time column `t` is in one of the sub-ranges.

    One OR branch per sub-range rather than a join on unnest(): with the bounds known
    at planning time each branch becomes a bitmap scan of a time index, where the
    join reads the whole window and filters it.
    """
    if count < 1:
        raise ValueError("ranges_sql needs at least one sub-range")
    lo, hi = f"${first}::timestamptz[]", f"${first + 1}::timestamptz[]"
    branches = " OR ".join(f"({t} >= ({lo})[{i}] AND {t} < ({hi})[{i}])"
                           for i in range(1, count + 1))
    return f" AND ({branches})"


def bucket_sql(view: View) -> str:
    """Return the per-bucket query; $3 is 'day' or 'hour', $4 the time zone name.

    One pass yields both the expected aggregate (rows no rule excludes) and the
    excluded counts per rule, so both come from the same snapshot of the source.
    """
    return (
        "SELECT date_trunc($3, r.t, $4) AS bucket, r.x AS rule, count(*) AS n, "
        f"{distinct_keys_sql('r.x IS NULL')} AS keys, "
        f"sum({ROW_HASH}) FILTER (WHERE r.x IS NULL) AS digest "
        f"FROM ({base_sql(view)}) AS r GROUP BY 1, 2 ORDER BY 1, 2"
    )


def slot_sql(view: View, *, distinct: bool = True) -> str:
    """Return the per-slot query; $3 is the slot interval, $4 the slots' origin.

    date_bin works on the absolute instant, so slots stay `$3` long across DST changes.
    Without `distinct` the key count is the row count (the caller knows keys are unique),
    which spares the sort a distinct count needs.
    """
    keys = (distinct_keys_sql("r.x IS NULL") if distinct
            else "count(*) FILTER (WHERE r.x IS NULL)")
    return (
        "SELECT date_bin($3::interval, r.t, $4::timestamptz) AS bucket, r.x AS rule, "
        f"count(*) AS n, {keys} AS keys, "
        f"sum({ROW_HASH}) FILTER (WHERE r.x IS NULL) AS digest "
        f"FROM ({base_sql(view)}) AS r GROUP BY 1, 2 ORDER BY 1, 2"
    )


def day_slot_sql(view: View) -> str:
    """Return day buckets by rule plus per-slot expected aggregates from one scan.

    $3 is the slot interval, $4 the time zone name, $5 the slots' origin. Rows with a NULL
    slot are the day set (one per day and rule); the others are the (day, slot) aggregates
    of rows no rule excludes. The row hash is computed once per row, below an OFFSET 0
    fence, so the one sort both nested grouping sets share carries a bigint, not the
    row encoding; that is what makes this cheaper than a day query plus a slot query.
    """
    return (
        "SELECT r.d AS bucket, r.s AS slot, r.x AS rule, count(*) AS n, "
        f"{distinct_keys_sql('r.x IS NULL')} AS keys, "
        f"{SIGNED64.format('sum(r.h) FILTER (WHERE r.x IS NULL)')} AS digest "
        "FROM (SELECT date_trunc('day', b.t, $4) AS d, "
        "date_bin($3::interval, b.t, $5::timestamptz) AS s, b.x, b.kd, "
        f"{ROW_HASH.replace('renc', 'b.renc')} AS h "
        f"FROM ({base_sql(view)}) AS b OFFSET 0) AS r "
        "GROUP BY GROUPING SETS ((1, 3), (1, 3, 2)) "
        "HAVING r.x IS NULL OR GROUPING(r.s) = 1"
    )


def prefix_sql(view: View, *, within: bool) -> str:
    """Return the per-prefix query; $3 is the depth, $4 LIKE patterns when `within`."""
    restrict = " AND md5(r.kenc) LIKE ANY($4::text[])" if within else ""
    return (
        "SELECT left(md5(r.kenc), $3) AS prefix, count(*) AS n, "
        f"{distinct_keys_sql('true')} AS keys, sum({ROW_HASH}) AS digest "
        f"FROM ({base_sql(view)}) AS r WHERE r.x IS NULL{restrict} GROUP BY 1 ORDER BY 1"
    )


def rows_sql(view: View, *, within: bool, ranges: int | None = None) -> str:
    """Return the expected rows' key text, key hash, row hash and event time.

    Parameters after $1, $2: LIKE patterns when `within`, then the starts and ends of
    `ranges` sub-ranges when given.
    """
    restrict = " AND md5(r.kenc) LIKE ANY($3::text[])" if within else ""
    base = base_sql(view, ranges=None if ranges is None else (4 if within else 3, ranges))
    return (
        f"SELECT r.ktext, md5(r.kenc) AS khash, {ROW_HASH} AS rhash, r.t "
        f"FROM ({base}) AS r WHERE r.x IS NULL{restrict}"
    )


def like_patterns(prefixes: list[str]) -> list[str]:
    """Return LIKE patterns for hex prefixes (hex digits hold no LIKE wildcards)."""
    out = []
    for p in prefixes:
        if not p or any(c not in "0123456789abcdef" for c in p):
            raise ValueError(f"key-hash prefix must be lowercase hex, got {p!r}")
        out.append(p + "%")
    return out


def value_counts_sql(view: View, column: str) -> str:
    """Return SQL counting rows per value of `column` in [$1, $2), skipping excluded rows."""
    t = quote_ident(view.time_column)
    value = quote_ident(column)
    # Booleans read as true/false, the same text the reader filter's values are compared by.
    return (f"SELECT ({value})::text AS value, count(*) AS n FROM {relation(view)} "
            f"WHERE {t} >= $1::timestamptz AND {t} < $2::timestamptz "
            f"AND ({exclusion_sql(view)}) IS NULL GROUP BY 1")
