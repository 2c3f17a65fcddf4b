"""The reader schema preflight: every configured field is readable before anything is counted.

A field a store cannot read (not mapped, no doc values, values it drops) makes rows
silently leave an aggregate or merge into one NULL key; the preflight turns each such
field into an error naming it, and settles the timestamp precision both sides can hold.
Each adapter describes its own fields (postgres/preflight.py, opensearch/preflight.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, runtime_checkable

from driftgauge import observe
from driftgauge.config.frozen import Check, Config, View
from driftgauge.core.errors import ConfigError, DriftgaugeError, SchemaError
from driftgauge.core.fields import FieldType, TimestampPrecision
from driftgauge.stores.base import StoreAdapter

if TYPE_CHECKING:
    from driftgauge.stores.pools import StorePools

Expects = FieldType | Literal["time"]
T = TypeVar("T")


@dataclass(frozen=True)
class Wanted:
    """One field a view reads, where the config names it."""

    role: str
    """`key` (`key.<part>` of a composite key), `time` or `fields.<canonical name>`."""
    column: str
    expects: Expects
    measure_scale: int | None = None
    """For a measure: its scale (-1 when none is declared); None: not a measure."""

    @property
    def is_key(self) -> bool:
        """Return True for the key or one of a composite key's parts (`key.<part>`)."""
        return self.role == "key" or self.role.startswith("key.")


@dataclass(frozen=True)
class FieldSchema:
    """What one store holds for one wanted field."""

    wanted: Wanted
    problems: tuple[str, ...] = ()
    """Why the field cannot be read safely; empty when it can."""
    precision: TimestampPrecision | None = None
    """For a timestamp: the finest precision every value can hold (capped at microseconds)."""
    holds: str = ""
    """What the store holds, for messages (e.g. `date in index X`)."""


@runtime_checkable
class Inspectable(Protocol):
    """An adapter that can describe its fields and hash timestamps at a given precision."""

    async def inspect_fields(self) -> list[FieldSchema]:
        """Return what the store holds for each field of wanted(view), in that order."""
        ...

    def use_timestamp_precision(self, precision: TimestampPrecision) -> None:
        """Hash timestamp fields at `precision` from now on."""
        ...


def wanted(view: View) -> list[Wanted]:
    """Return the key, the time and each content field a view reads."""
    if view.composite:
        out = [Wanted(f"key.{p.name}", p.column, p.type) for p in view.key_parts]
    else:
        out = [Wanted("key", view.key_column, view.key_type)]
    out.append(Wanted("time", view.time_column, "time"))
    scale = -1 if view.measure_scale is None else view.measure_scale
    out += [
        Wanted(f"fields.{f.name}", col, f.type, scale if f.name in view.measures else None)
        for col, f in zip(view.columns, view.fields, strict=True)
    ]
    return out


def wrong_type(
    w: Wanted, type_name: str, accepts: frozenset[str], why: str | None, holds: str
) -> FieldSchema:
    """Return the refusal of a column of `type_name` that `w` cannot read (`why`: a reason)."""
    what = "the time field" if w.expects == "time" else f"a {w.expects} field"
    return FieldSchema(
        w,
        (
            f"column {w.column} is {type_name}{f' ({why})' if why else ''}; "
            f"{what} reads one of {', '.join(sorted(accepts))}",
        ),
        holds=holds,
    )


def relation_where(view: View) -> str:
    """Return where a view's columns come from, for messages: its table or its query."""
    return f"table {view.table}" if view.table is not None else "the view's query"


def first_types(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Return each column's type from (name, type) pairs; the first of a repeated name wins."""
    types: dict[str, str] = {}
    for name, type_name in pairs:
        types.setdefault(name, type_name)
    return types


@dataclass(frozen=True)
class TypeRules:
    """How a SQL kind's column types read as fields: what each field type accepts, and why not."""

    accepts: Mapping[Expects, frozenset[str] | None]
    """Base types each field type reads from (None: every scalar type)."""
    why: Mapping[str, str]
    """Why a base type is refused as a decimal field."""
    base: Callable[[str], str]
    """A type name without its parameters (decimal(12,2) is decimal)."""
    nested: Callable[[str], bool]
    """Whether a type holds more than one value (arrays, maps, structs)."""
    precision: Callable[[str], TimestampPrecision] = lambda type_name: "us"
    """The finest precision a timestamp column of a type holds."""
    limit: Callable[[Wanted, str], str | None] = lambda w, type_name: None
    """Why a column of a type its field accepts still cannot be read (None: it can)."""

    def refusal(self, w: Wanted, type_name: str, holds: str) -> FieldSchema | None:
        """Return why `w` cannot read a column of `type_name`, or None when it can."""
        if self.nested(type_name):
            problem = f"column {w.column} is {type_name}; a field holds one value per row"
            return FieldSchema(w, (problem,), holds=holds)
        accepts = self.accepts[w.expects]
        base = self.base(type_name)
        if accepts is not None and base not in accepts:
            why = self.why.get(base) if w.expects == "decimal" else None
            return wrong_type(w, type_name, accepts, why, holds)
        limited = self.limit(w, type_name)
        return None if limited is None else FieldSchema(w, (limited,), holds=holds)

    @classmethod
    def of_scalars(
        cls,
        integers: frozenset[str],
        times: frozenset[str],
        text: tuple[str, ...],
        floats: tuple[str, ...],
        *,
        base: Callable[[str], str],
        nested: Callable[[str], bool],
        decimal: str = "decimal",
        boolean: str = "boolean",
        precision: Callable[[str], TimestampPrecision] = lambda type_name: "us",
        limit: Callable[[Wanted, str], str | None] = lambda w, type_name: None,
    ) -> TypeRules:
        """Return the rules of an engine whose every scalar type has a text form.

        An integer field reads an integer or `text` (the first is the engine's text type), a
        decimal field an integer or `decimal`, a boolean field `boolean` or the text type;
        a decimal field refuses `floats` and text saying why. An integer wider than 64 bits
        fails loudly.
        """
        accepts: dict[Expects, frozenset[str] | None] = {
            "string": None,
            "integer": integers | set(text),
            "decimal": integers | {decimal},
            "boolean": frozenset({boolean, text[0]}),
            "timestamp": times,
            "time": times,
        }
        inexact = "text is not the same on every store; cast it to DECIMAL"
        why = {f: f"a {f.lower()}'s {inexact}" for f in floats}
        why[text[0]] = "text is not checked for a plain decimal form; cast it to DECIMAL"
        return cls(accepts, why, base, nested, precision, limit)

    def judge(self, w: Wanted, type_name: str, where: str) -> FieldSchema:
        """Return whether a column of `type_name` in `where` reads as the field `w` expects."""
        holds = f"{type_name} in {where}"
        refused = self.refusal(w, type_name, holds)
        if refused is not None:
            return refused
        precision = self.precision(type_name) if w.expects == "timestamp" else None
        return FieldSchema(w, precision=precision, holds=holds)

    def judge_schema(self, view: View, pairs: Sequence[tuple[str, str]]) -> list[FieldSchema]:
        """Judge each wanted field against the (column, type) pairs of the view's relation."""
        where = relation_where(view)
        types = first_types(pairs)
        return judge_columns(view, types, where, lambda w, typ: self.judge(w, typ, where))


def judge_columns(
    view: View, columns: Mapping[str, T], where: str, judge: Callable[[Wanted, T], FieldSchema]
) -> list[FieldSchema]:
    """Judge the column of each wanted field; a missing one is a problem naming those there."""
    out = []
    for w in wanted(view):
        column = columns.get(w.column)
        if column is None:
            has = ", ".join(columns) or "no columns"
            out.append(
                FieldSchema(w, (f"column {w.column} does not exist in {where} (it has {has})",))
            )
        else:
            out.append(judge(w, column))
    return out


async def preflight(check: Check, source: StoreAdapter, reader: StoreAdapter) -> TimestampPrecision:
    """Check both sides' fields, then set and return the timestamp precision both use.

    Raises SchemaError listing every problem (each located as checks.NAME.SIDE.ROLE) and
    StoreError when a store cannot be asked. Adapters that cannot describe their fields
    (in-memory fakes) are taken as they are.
    """
    where = f"checks.{check.name}"
    problems: list[str] = []
    described: list[tuple[str, FieldSchema]] = []
    for side, adapter in (("source", source), ("reader", reader)):
        if not isinstance(adapter, Inspectable):
            continue
        with observe.store_call(getattr(check, side).store.name, "preflight"):
            fields = await adapter.inspect_fields()
        for fs in fields:
            problems += [f"{where}.{side}.{fs.wanted.role}: {p}" for p in fs.problems]
            described.append((side, fs))
    precision = resolve_precision(check, described, problems)
    if problems:
        raise SchemaError(problems)
    for adapter in (source, reader):
        if isinstance(adapter, Inspectable):
            adapter.use_timestamp_precision(precision)
    return precision


def resolve_precision(
    check: Check, described: Sequence[tuple[str, FieldSchema]], problems: list[str]
) -> TimestampPrecision:
    """Return the check's timestamp precision; `auto` is the coarsest a content field holds.

    A configured precision finer than some side holds would mismatch every row whose
    source time has more digits, so it is a problem naming that field.
    """
    setting = check.timestamp_precision
    held = [
        (side, fs)
        for side, fs in described
        if fs.wanted.expects == "timestamp" and fs.precision is not None
    ]
    coarse = [(side, fs) for side, fs in held if fs.precision == "ms"]
    if setting == "auto":
        return "ms" if coarse else "us"
    if setting == "us":
        for side, fs in coarse:
            problems.append(
                f"checks.{check.name}.{side}.{fs.wanted.role}: field {fs.wanted.column} is "
                f"{fs.holds}, which holds milliseconds; timestamp_precision us would "
                "mismatch every row with finer source times (use ms or auto)"
            )
    return setting


async def verify(check: Check, stores: StorePools | None = None) -> TimestampPrecision:
    """Open both sides of a check, run the preflight and close them (for config validation).

    With `stores`, both sides use those shared connections (the caller closes them).
    """
    from driftgauge.stores import open_adapter

    async def open_side(view: View) -> StoreAdapter:
        return await (open_adapter(view) if stores is None else stores.adapter(view))

    source = await open_side(check.source)
    try:
        reader = await open_side(check.reader)
        try:
            return await preflight(check, source, reader)
        finally:
            await reader.close()
    finally:
        await source.close()


async def verify_all(config: Config) -> list[str]:
    """Return every check's preflight problems, each located (empty: all fields readable).

    A store that cannot be asked is one problem at `checks.NAME`; the other checks are
    still verified, so one call lists every problem.
    """
    from driftgauge.stores.pools import StorePools

    problems: list[str] = []
    stores = StorePools()
    try:
        for name, check in config.checks.items():
            try:
                await verify(check, stores)
            except ConfigError as exc:
                problems += exc.problems
            except DriftgaugeError as exc:
                problems.append(f"checks.{name}: {exc}")
    finally:
        await stores.close()
    return problems
