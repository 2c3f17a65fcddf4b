"""SQL for the canonical encoding and the digest queries on MariaDB / MySQL (no I/O).

Every identifier from config is quoted; every value is a named bind parameter
(`%(name)s`, the driver's style), so a literal `%` in operator SQL is doubled. Exclusion
predicates and a view's `query` are SQL written by the operator and go in verbatim.
Sessions run with time_zone '+00:00': DATETIME and TIMESTAMP columns read as UTC.
"""

from __future__ import annotations

from driftgauge.config.runtime import View
from driftgauge.core.fields import FieldType, TimestampPrecision

TWO_64 = "18446744073709551616"
EPOCH = "'1970-01-01 00:00:00'"


def quote_ident(name: str) -> str:
    """Return an identifier quoted with backticks so any name is taken literally."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid identifier {name!r}")
    return "`" + name.replace("`", "``") + "`"


def verbatim(sql: str) -> str:
    """Return operator SQL with `%` doubled, as the driver's parameter style needs."""
    return sql.replace("%", "%%")


def relation(view: View) -> str:
    """Return the FROM item of a view: its query as a derived table, or its quoted table."""
    if view.query is not None:
        return f"({verbatim(view.query.strip().rstrip(';'))}) AS src"
    if view.table is None:
        raise ValueError("a mariadb view needs a query or a table")
    return ".".join(quote_ident(part) for part in view.table.split(".")) + " AS src"


def _text(col: str) -> str:
    # The bytes md5 sees are the utf8mb4 form, whatever the column's own character set.
    return f"CONVERT(({col}) USING utf8mb4)"


def _decimal_text(col: str) -> str:
    """Return the plain text of a DECIMAL without trailing fractional zeros (trim_scale)."""
    raw = f"CAST(({col}) AS CHAR)"
    trimmed = f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {raw}))"
    text = f"IF(LOCATE('.', {raw}) > 0, {trimmed}, {raw})"
    return f"IF({text} = '-0', '0', {text})"


def epoch_micros_sql(col: str, precision: TimestampPrecision = "us") -> str:
    """Return the epoch microseconds of a UTC DATETIME/TIMESTAMP, floored to `precision`."""
    micros = f"TIMESTAMPDIFF(MICROSECOND, {EPOCH}, ({col}))"
    if precision == "us":
        return micros
    # FLOOR rounds down before 1970 too, as Python's // does; DIV would round toward zero.
    return f"CAST(FLOOR({micros} / 1000) * 1000 AS SIGNED)"


def token_sql(column: str, type_: FieldType, precision: TimestampPrecision = "us") -> str:
    """Return a SQL expression of a column's canonical token (see docs/digest.md)."""
    col = quote_ident(column)
    if type_ == "string":
        enc = f"CONCAT('S', CHAR_LENGTH({_text(col)}), ':', {_text(col)})"
    elif type_ == "integer":
        enc = f"CONCAT('I', CAST(({col}) AS SIGNED), ';')"
    elif type_ == "decimal":
        enc = f"CONCAT('D', {_decimal_text(col)}, ';')"
    elif type_ == "boolean":
        enc = f"IF(({col}) <> 0, 'T', 'F')"
    elif type_ == "timestamp":
        enc = f"CONCAT('M', {epoch_micros_sql(col, precision)}, ';')"
    else:
        raise ValueError(f"unknown field type {type_!r}")
    return f"(CASE WHEN ({col}) IS NULL THEN 'N' ELSE {enc} END)"


def key_text_sql(view: View) -> str:
    """Return a SQL expression of the key's canonical text."""
    col = quote_ident(view.key_column)
    if view.key_type == "integer":
        return f"CAST(CAST(({col}) AS SIGNED) AS CHAR)"
    return _text(col)


def key_distinct_sql(view: View) -> str:
    """Return the key as a value whose equality is the key encoding's.

    Binary, not utf8mb4_bin: the _bin collations are PAD SPACE, so 'b' and 'b ' would
    count as one key; and never the column's collation, which may fold case or accents.
    """
    col = quote_ident(view.key_column)
    if view.key_type == "integer":
        return f"CAST(({col}) AS SIGNED)"
    return f"CAST({_text(col)} AS BINARY)"


def row_encoding_sql(view: View) -> str:
    """Return a SQL expression of the row encoding: key token then each field's token."""
    parts = [token_sql(view.key_column, view.key_type)]
    parts += [
        token_sql(col, f.type, view.timestamp_precision)
        for col, f in zip(view.columns, view.fields, strict=True)
    ]
    return f"CONVERT(CONCAT({', '.join(parts)}) USING utf8mb4)"


def row_hash_sql(renc: str) -> str:
    """Return the first 8 bytes of md5(row encoding), big-endian, as BIGINT UNSIGNED."""
    return f"CAST(CONV(LEFT(MD5({renc}), 16), 16, 10) AS UNSIGNED)"


def exclusion_sql(view: View) -> str:
    """Return the 1-based index of the first exclusion rule a row matches, else NULL."""
    rules = [ex for ex in view.exclusions if ex.where is not None]
    if not rules:
        return "CAST(NULL AS SIGNED)"
    whens = " ".join(
        f"WHEN ({verbatim(ex.where)}) IS TRUE THEN {i}"
        for i, ex in enumerate(rules, 1)
        if ex.where is not None
    )
    return f"CASE {whens} END"


def base_sql(view: View, *, ranges: int | None = None) -> str:
    """Return the rows in [%(start)s, %(end)s) with exclusion index, time, key and encodings.

    With `ranges` = n, only rows inside one of n sub-ranges %(lo0)s..%(hi{n-1})s are kept.
    """
    t = quote_ident(view.time_column)
    col = quote_ident(view.key_column)
    kenc = token_sql(view.key_column, view.key_type)
    return (
        f"SELECT {exclusion_sql(view)} AS x, ({t}) AS t, {key_text_sql(view)} AS ktext, "
        f"CONVERT({kenc} USING utf8mb4) AS kenc, {key_distinct_sql(view)} AS kd, "
        f"({col}) IS NULL AS knull, {row_encoding_sql(view)} AS renc"
        # Measures as they are: SUM of a DECIMAL or an integer is an exact DECIMAL.
        f"{''.join(f', ({quote_ident(m)}) AS m{i}' for i, m in enumerate(view.measure_columns))} "
        f"FROM {relation(view)} "
        f"WHERE {t} >= %(start)s AND {t} < %(end)s"
        f"{'' if ranges is None else ranges_sql(t, ranges)}"
    )


def ranges_sql(t: str, count: int) -> str:
    """Return an AND clause keeping rows whose time `t` is in one of `count` sub-ranges."""
    if count < 1:
        raise ValueError("ranges_sql needs at least one sub-range")
    branches = " OR ".join(f"({t} >= %(lo{i})s AND {t} < %(hi{i})s)" for i in range(count))
    return f" AND ({branches})"


def _aggregates(where: str) -> str:
    """Return count, distinct keys (a NULL key counts once) and digest mod 2^64."""
    keys = (
        f"COUNT(DISTINCT IF({where}, r.kd, NULL)) + "
        f"COALESCE(MAX(IF({where} AND r.knull, 1, NULL)), 0)"
    )
    # SUM of BIGINT UNSIGNED is an exact DECIMAL(65); MOD keeps it exact too.
    digest = f"MOD(SUM(IF({where}, {row_hash_sql('r.renc')}, NULL)), {TWO_64})"
    return f"{keys} AS `keys`, {digest} AS digest"


def _measure_sums(view: View) -> str:
    """Return `, SUM(m0) AS m0, ...` over the rows no rule excludes."""
    return "".join(
        f", SUM(IF(r.x IS NULL, r.m{i}, NULL)) AS m{i}" for i in range(len(view.measures))
    )


def day_sql(view: View) -> str:
    """Return the per-day query: the local date in %(tz)s, rule, count, keys, digest.

    CONVERT_TZ needs the server's zone tables; the caller turns each local date into
    its UTC midnight, so days of 23 or 25 hours come out right.
    """
    return (
        "SELECT DATE(CONVERT_TZ(r.t, '+00:00', %(tz)s)) AS bucket, r.x AS rule, "
        f"COUNT(*) AS n, {_aggregates('r.x IS NULL')}{_measure_sums(view)} "
        f"FROM ({base_sql(view)}) AS r GROUP BY 1, 2 ORDER BY 1, 2"
    )


def slot_sql(view: View) -> str:
    """Return the per-slot query: slot number from %(origin)s in %(step)s microseconds."""
    return (
        "SELECT TIMESTAMPDIFF(MICROSECOND, %(origin)s, r.t) DIV %(step)s AS bucket, "
        f"r.x AS rule, COUNT(*) AS n, {_aggregates('r.x IS NULL')}{_measure_sums(view)} "
        f"FROM ({base_sql(view)}) AS r GROUP BY 1, 2 ORDER BY 1, 2"
    )


def prefix_sql(view: View, *, within: int | None) -> str:
    """Return the per-prefix query; %(depth)s digits, `within` LIKE patterns %(p0)s...."""
    restrict = "" if within is None else " AND " + _like_any("MD5(r.kenc)", within)
    return (
        f"SELECT LEFT(MD5(r.kenc), %(depth)s) AS prefix, COUNT(*) AS n, {_aggregates('TRUE')} "
        f"FROM ({base_sql(view)}) AS r WHERE r.x IS NULL{restrict} GROUP BY 1 ORDER BY 1"
    )


def rows_sql(view: View, *, within: int | None, ranges: int | None = None) -> str:
    """Return the expected rows' key text, key hash, row hash and event time."""
    restrict = "" if within is None else " AND " + _like_any("MD5(r.kenc)", within)
    return (
        f"SELECT r.ktext, MD5(r.kenc) AS khash, {row_hash_sql('r.renc')} AS rhash, r.t "
        f"FROM ({base_sql(view, ranges=ranges)}) AS r WHERE r.x IS NULL{restrict}"
    )


def _like_any(expr: str, count: int) -> str:
    if count < 1:
        raise ValueError("at least one prefix is needed")
    return "(" + " OR ".join(f"{expr} LIKE %(p{i})s" for i in range(count)) + ")"


def like_patterns(prefixes: list[str]) -> dict[str, str]:
    """Return LIKE parameters p0, p1, ... for hex prefixes (hex holds no LIKE wildcards)."""
    out = {}
    for i, p in enumerate(prefixes):
        if not p or any(c not in "0123456789abcdef" for c in p):
            raise ValueError(f"key-hash prefix must be lowercase hex, got {p!r}")
        out[f"p{i}"] = p + "%"
    return out
