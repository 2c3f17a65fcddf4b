"""The digest queries every SQL engine runs, written once over the spellings a dialect overrides.

A SQL store kind subclasses SqlDialect and overrides the hooks its engine spells otherwise
(quoting, parameters, casts, md5, aggregates with a filter, time buckets); the queries
built here (row encoding, exclusions, buckets, slots, prefixes, row export, value counts)
then come out in its dialect. Every identifier from config is quoted; every value is a
bind parameter. Exclusion predicates and a view's `query` are SQL written by the operator
and go in verbatim. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from driftgauge.config.frozen import Exclusion, View
from driftgauge.core.fields import FieldType, RowHashName, TimestampPrecision


def spelling(template: str, doc: str) -> Any:
    """Return a dialect hook that writes its SQL expressions into `template` at {0}, {1}, ...

    Typed Any: the class binds it as a method, whatever the hook's parameters are called.
    """

    def hook(self: Any, *exprs: str) -> str:
        return template.format(*exprs)

    hook.__doc__ = doc
    return hook


class SqlDialect:
    """The shared query builders; the methods above `relation` are the dialect's spellings."""

    name = "sql"
    """The store kind's name, in messages."""
    no_rule = "NULL"
    """The exclusion index of a view without rules."""
    row_hashes: ClassVar[Mapping[RowHashName, str]] = {}
    """Each row hash the engine computes, as SQL over `{0}` (the row encoding) giving the
    hash's 64 bits as an integer (signed or unsigned; sums are reduced mod 2^64). The one
    place a dialect spells its row hashes."""
    reserved: frozenset[str] = frozenset()
    """Column aliases of the queries that are reserved words in this engine (quoted)."""
    escapes: tuple[tuple[str, str], ...] = ()
    """Replacements that operator SQL needs to reach the engine unchanged through the driver."""
    quote = '"'
    """The character quoting an identifier (doubled inside it)."""

    # ---- spellings ---------------------------------------------------------------------

    def quote_ident(self, name: str) -> str:
        """Return an identifier quoted so any name (case, spaces, quotes) is taken literally."""
        if not name or "\x00" in name:
            raise ValueError(f"invalid identifier {name!r}")
        return self.quote + name.replace(self.quote, self.quote * 2) + self.quote

    def alias(self, name: str) -> str:
        """Return a column alias as the engine takes it (quoted where the name is reserved)."""
        return self.quote_ident(name) if name in self.reserved else name

    def verbatim(self, sql: str) -> str:
        """Return operator SQL (a view's query, an exclusion) as the driver must receive it."""
        for old, new in self.escapes:
            sql = sql.replace(old, new)
        return sql

    def param(self, n: int, type_: str | None = None) -> str:
        """Return bind parameter number `n` (1-based), cast to `type_` when given."""
        raise NotImplementedError

    def concat(self, *parts: str) -> str:
        """Return the text concatenation of SQL expressions."""
        return " || ".join(parts)

    def text(self, expr: str) -> str:
        """Return `expr` as text."""
        return f"CAST(({expr}) AS TEXT)"

    def bigint(self, expr: str) -> str:
        """Return `expr` as a signed 64-bit integer."""
        return f"CAST(({expr}) AS BIGINT)"

    def decimal_text(self, expr: str) -> str:
        """Return a decimal's shortest text: no trailing zeros after the point, no exponent."""
        raise NotImplementedError

    def measure(self, expr: str) -> str:
        """Return a measure column as it is: an engine sums a DECIMAL (or an integer) exactly.

        Not cast to NUMERIC: that type's default scale differs by engine (DuckDB's is
        DECIMAL(18, 3), which rounds); PostgreSQL's numeric is exact and casts.
        """
        return f"({expr})"

    def boolean(self, expr: str) -> str:
        """Return `expr` as a boolean condition."""
        return f"CAST(({expr}) AS BOOLEAN)"

    def char_length(self, expr: str) -> str:
        """Return the length of a text in characters (code points)."""
        return f"char_length({expr})"

    def instant(self, expr: str) -> str:
        """Return `expr` as an absolute instant (a time without zone is read as UTC)."""
        raise NotImplementedError

    def epoch_micros(self, col: str, precision: TimestampPrecision) -> str:
        """Return microseconds since the epoch of a time column, floored to `precision`."""
        raise NotImplementedError

    def md5(self, expr: str) -> str:
        """Return the 32 lowercase hex digits of md5 over the UTF-8 bytes of `expr`."""
        return f"md5({expr})"

    def row_hash(self, view: View, renc: str) -> str:
        """Return the view's row hash of row encoding `renc`; ValueError if the engine lacks it."""
        template = self.row_hashes.get(view.row_hash)
        if template is None:
            raise ValueError(f"a {self.name} store cannot compute the {view.row_hash} row hash")
        return template.format(renc)

    def filtered(self, func: str, arg: str, where: str, *, distinct: bool = False) -> str:
        """Return aggregate `func` over `arg` of the rows matching `where`."""
        each = "1" if arg == "*" else arg
        return f"{func}({'DISTINCT ' if distinct else ''}CASE WHEN {where} THEN {each} END)"

    def kept(self, view: View, func: str, arg: str, alias: str = "r") -> str:
        """Return aggregate `func` over `arg` of the rows no rule excludes.

        A view without rules gives every row the constant NULL rule, so the aggregate is
        plain: a filter would test every row for nothing (2-4% of PostgreSQL's day pass at
        10M rows, more where the filter is a CASE).
        """
        keep = self.keep(view, alias)
        return f"{func}({arg})" if keep is None else self.filtered(func, arg, keep)

    def keep(self, view: View, alias: str = "r") -> str | None:
        """Return the condition keeping rows no rule excludes; None when no rule can."""
        return f"{alias}.x IS NULL" if view.sql_rules else None

    def key_distinct(self, view: View) -> str:
        """Return the key as a value whose equality is the key encoding's, cheap to sort.

        Counting distinct raw keys gives the same number as distinct encodings without
        building and sorting the encodings: a BIGINT, or the text_key of a text key.
        """
        col = self.quote_ident(view.key_column)
        if view.key_type == "integer":
            return f"({self.bigint(col)})"
        return self.text_key(col)

    def text_key(self, col: str) -> str:
        """Return a key column as text compared byte by byte (no collation folds two apart)."""
        return self.bytewise(self.text(col))

    def head(self, expr: str, n: str) -> str:
        """Return the first `n` characters of a text."""
        return f"left({expr}, {n})"

    def bytewise(self, expr: str) -> str:
        """Return a text expression compared byte by byte (no collation folds two apart)."""
        return expr

    def prefix_in(self, khash: str, param: str) -> str:
        """Return whether a key hash starts with one of the LIKE patterns in `param`."""
        raise NotImplementedError

    def bucket(self, t: str) -> str:
        """Return the bucket of time `t`: parameter 3 is 'day' or 'hour', 4 the time zone."""
        raise NotImplementedError

    def slot(self, t: str) -> str:
        """Return the slot start of `t`: parameter 3 is the slot interval, 4 the origin."""
        raise NotImplementedError

    def ranges_sql(self, t: str, first: int, count: int) -> str:
        """Return an AND clause keeping rows whose time `t` is in one of `count` sub-ranges.

        Their starts and ends are the parameters from `first` on, as the adapter binds them.
        """
        raise NotImplementedError

    def points_sql(self, t: str, first: int) -> str | None:
        """Return an AND clause keeping rows whose time `t` is one of the instants in
        parameter `first` (an array); None where the dialect does not offer it (ranges then).
        """
        return None

    # ---- the queries -------------------------------------------------------------------

    def relation(self, view: View) -> str:
        """Return the FROM item of a view: its query as a subquery, or its quoted table."""
        if view.query is not None:
            return f"({self.verbatim(view.query.strip().rstrip(';'))}) AS src"
        if view.table is None:
            raise ValueError(f"a {self.name} view needs a query or a table")
        return ".".join(self.quote_ident(part) for part in view.table.split(".")) + " AS src"

    def token_sql(self, column: str, type_: FieldType, precision: TimestampPrecision = "us") -> str:
        """Return a SQL expression of a column's canonical token (see docs/digest.md)."""
        col = self.quote_ident(column)
        if type_ == "string":
            enc = self.concat("'S'", self.char_length(self.text(col)), "':'", self.text(col))
        elif type_ == "integer":
            enc = self.concat("'I'", self.text(self.bigint(col)), "';'")
        elif type_ == "decimal":
            enc = self.concat("'D'", self.decimal_text(col), "';'")
        elif type_ == "boolean":
            enc = f"CASE WHEN {self.boolean(col)} THEN 'T' ELSE 'F' END"
        elif type_ == "timestamp":
            enc = self.concat("'M'", self.text(self.epoch_micros(col, precision)), "';'")
        else:
            raise ValueError(f"unknown field type {type_!r}")
        return f"(CASE WHEN ({col}) IS NULL THEN 'N' ELSE {enc} END)"

    def key_text_sql(self, view: View) -> str:
        """Return a SQL expression of the key's canonical text.

        A composite key's is its encoding, which the adapter turns into the JSON array.
        """
        if view.composite:
            return self.key_encoding_sql(view)
        col = self.quote_ident(view.key_column)
        if view.key_type == "integer":
            return self.text(self.bigint(col))
        return self.text(col)

    def key_encoding_sql(self, view: View) -> str:
        """Return a SQL expression of the key encoding (a composite key's: `K<n>:` + tokens)."""
        if view.composite:
            tokens = [self.token_sql(p.column, p.type) for p in view.key_parts]
            return self.concat(f"'K{len(tokens)}:'", *tokens)
        return self.token_sql(view.key_column, view.key_type)

    def key_distinct_sql(self, view: View) -> str:
        """Return the value distinct keys are counted by: a composite key's encoding."""
        if view.composite:
            return self.bytewise(self.key_encoding_sql(view))
        return self.key_distinct(view)

    def row_encoding_sql(self, view: View) -> str:
        """Return a SQL expression of the row encoding: key token then each field's token."""
        parts = [self.key_encoding_sql(view)]
        parts += [
            self.token_sql(col, f.type, view.timestamp_precision)
            for col, f in zip(view.columns, view.fields, strict=True)
        ]
        return self.concat(*parts)

    def exclusion_sql(self, view: View) -> str:
        """Return the 1-based index of the first exclusion rule a row matches, else NULL."""
        rules = view.sql_rules
        if not rules:
            return self.no_rule
        whens = " ".join(f"WHEN {self.rule_sql(ex)} THEN {i}" for i, ex in enumerate(rules, 1))
        return f"CASE {whens} END"

    def rule_sql(self, ex: Exclusion) -> str:
        """Return an exclusion's condition: the operator's predicate, or NULL key parts."""
        if ex.where is not None:
            return f"({self.verbatim(ex.where)}) IS TRUE"
        return "(" + " OR ".join(f"{self.quote_ident(c)} IS NULL" for c in ex.null_columns) + ")"

    def window(self, t: str) -> str:
        """Return the condition keeping rows whose time `t` is in [$1, $2)."""
        return f"{t} >= {self.param(1, 'timestamptz')} AND {t} < {self.param(2, 'timestamptz')}"

    def base_sql(
        self, view: View, *, ranges: tuple[int, int] | None = None, points: int | None = None
    ) -> str:
        """Return the rows in [$1, $2) with exclusion index, event time, key text and encodings.

        With `ranges` = (n, count), only rows inside one of `count` sub-ranges are kept,
        their bounds given from parameter n on (see ranges_sql); with `points` = n, only
        rows at one of the instants of parameter n (see points_sql).
        """
        t = self.quote_ident(view.time_column)
        if points is not None:
            only = self.points_sql(t, points)
            if only is None:
                raise ValueError(f"{self.name} offers no export at a list of instants")
            return self._base(view, t, only)
        return self._base(view, t, "" if ranges is None else self.ranges_sql(t, *ranges))

    def _base(self, view: View, t: str, only: str) -> str:
        return (
            f"SELECT {self.exclusion_sql(view)} AS x, {self.instant(t)} AS t, "
            f"{self.key_text_sql(view)} AS ktext, {self.key_encoding_sql(view)} AS kenc, "
            f"{self.key_distinct_sql(view)} AS kd, {self.row_encoding_sql(view)} AS renc"
            f"{self.measure_columns_sql(view)} "
            f"FROM {self.relation(view)} "
            f"WHERE {self.window(t)}{only}"
        )

    def measure_columns_sql(self, view: View) -> str:
        """Return `, <column> AS m0, ...` for the view's measures (empty without any)."""
        return "".join(
            f", {self.measure(self.quote_ident(col))} AS m{i}"
            for i, col in enumerate(view.measure_columns)
        )

    def carried(self, view: View, alias: str) -> str:
        """Return `, <alias>.m0, ...`: the view's measures carried out of a subquery."""
        return "".join(f", {alias}.m{i}" for i in range(len(view.measures)))

    def measure_sums_sql(self, view: View, alias: str = "r", *, only: str | None = None) -> str:
        """Return `, sum(m0) AS m0, ...` over the rows no rule excludes (NULL unless `only`)."""
        sums = [self.kept(view, "sum", f"{alias}.m{i}", alias) for i in range(len(view.measures))]
        if only is not None:
            sums = [f"CASE WHEN {only} THEN {total} END" for total in sums]
        return "".join(f", {total} AS m{i}" for i, total in enumerate(sums))

    def distinct_keys_sql(self, where: str) -> str:
        """Return the distinct-key count of the rows matching `where` (a NULL key counts once)."""
        nulls = self.filtered("max", "CASE WHEN r.kd IS NULL THEN 1 END", where)
        return f"({self.filtered('count', 'r.kd', where, distinct=True)} + coalesce({nulls}, 0))"

    def _digests(self, view: View, bucket: str, keys: str, *, ordered: bool = True) -> str:
        return (
            f"SELECT {bucket} AS bucket, r.x AS rule, count(*) AS n, "
            f"{keys} AS {self.alias('keys')}, "
            f"{self.kept(view, 'sum', self.row_hash(view, 'renc'))} AS digest"
            f"{self.measure_sums_sql(view)} "
            f"FROM ({self.base_sql(view)}) AS r GROUP BY 1, 2{' ORDER BY 1, 2' if ordered else ''}"
        )

    def bucket_sql(self, view: View) -> str:
        """Return the per-bucket query; $3 is 'day' or 'hour', $4 the time zone name.

        One pass yields both the expected aggregate (rows no rule excludes) and the
        excluded counts per rule, so both come from the same snapshot of the source.
        """
        return self._digests(view, self.bucket("r.t"), self._keys(view, True))

    def unique_bucket_sql(self, view: View) -> str:
        """Return bucket_sql counting keys as rows, for a caller that knows they are unique.

        The sort a distinct count needs was a quarter of the day pass at 10M rows. Not
        ordered either (the caller sorts the buckets), so with sorts disabled the groups
        are hashed: the pass then costs what a bare per-day count and digest does.
        """
        return self._digests(view, self.bucket("r.t"), self._keys(view, False), ordered=False)

    def slot_sql(self, view: View, *, distinct: bool = True) -> str:
        """Return the per-slot query; $3 is the slot interval, $4 the slots' origin.

        Slots are spans of absolute time, so they stay `$3` long across DST changes.
        Without `distinct` the key count is the row count (the caller knows keys are
        unique), which spares the sort a distinct count needs.
        """
        return self._digests(view, self.slot("r.t"), self._keys(view, distinct))

    def _keys(self, view: View, distinct: bool) -> str:
        if distinct:
            return self.distinct_keys_sql("r.x IS NULL")
        return self.kept(view, "count", "*")

    def day_slot_sql(self, view: View) -> str:
        """Return day buckets by rule plus per-slot expected aggregates from one scan.

        Rows with a NULL slot are the day set (one per day and rule); the others are the
        (day, slot) aggregates of rows no rule excludes.
        """
        raise NotImplementedError

    def prefix_sql(self, view: View, *, within: bool) -> str:
        """Return the per-prefix query; $3 is the depth, $4 LIKE patterns when `within`."""
        khash = self.md5("r.kenc")
        restrict = f" AND {self.prefix_in(khash, self.param(4, 'text[]'))}" if within else ""
        return (
            f"SELECT {self.head(khash, self.param(3))} AS prefix, count(*) AS n, "
            f"{self.distinct_keys_sql('true')} AS {self.alias('keys')}, "
            f"sum({self.row_hash(view, 'renc')}) AS digest "
            f"FROM ({self.base_sql(view)}) AS r WHERE r.x IS NULL{restrict} GROUP BY 1 ORDER BY 1"
        )

    def rows_sql(
        self, view: View, *, within: bool, ranges: int | None = None, points: bool = False
    ) -> str:
        """Return the expected rows' key text, key hash, row hash and event time.

        Parameters after $1, $2: LIKE patterns when `within`, then the starts and ends of
        `ranges` sub-ranges when given, or with `points` the array of instants.
        """
        khash = self.md5("r.kenc")
        restrict = f" AND {self.prefix_in(khash, self.param(3, 'text[]'))}" if within else ""
        first = 4 if within else 3
        base = (
            self.base_sql(view, points=first)
            if points
            else self.base_sql(view, ranges=None if ranges is None else (first, ranges))
        )
        return (
            f"SELECT r.ktext, {khash} AS khash, {self.row_hash(view, 'renc')} AS rhash, r.t "
            f"FROM ({base}) AS r WHERE r.x IS NULL{restrict}"
        )

    def value_counts_sql(self, view: View, column: str) -> str:
        """Return SQL counting rows per value of `column` in [$1, $2), skipping excluded rows."""
        t = self.quote_ident(view.time_column)
        # Booleans read as true/false, the same text the reader filter's values are compared by.
        return (
            f"SELECT {self.text(self.quote_ident(column))} AS value, count(*) AS n "
            f"FROM {self.relation(view)} WHERE {self.window(t)} "
            f"AND ({self.exclusion_sql(view)}) IS NULL GROUP BY 1"
        )

    @staticmethod
    def like_patterns(prefixes: list[str]) -> list[str]:
        """Return LIKE patterns for hex prefixes (hex digits hold no LIKE wildcards)."""
        out = []
        for p in prefixes:
            if not p or any(c not in "0123456789abcdef" for c in p):
                raise ValueError(f"key-hash prefix must be lowercase hex, got {p!r}")
            out.append(p + "%")
        return out
