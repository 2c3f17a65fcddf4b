"""Load a YAML config, validate it and build frozen runtime objects."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from driftgauge.config import secrets
from driftgauge.config.frozen import (
    Api,
    Check,
    Config,
    Exclusion,
    Field,
    Lease,
    Retention,
    Schedule,
    State,
    Store,
    Tolerance,
    View,
    null_key_rule,
)
from driftgauge.config.secrets import Secret
from driftgauge.config.values import parse_duration
from driftgauge.configfile import model as m
from driftgauge.configfile import resolve, signals, yaml_doc
from driftgauge.configfile.keys import KeyShape, parts_of, resolve_key
from driftgauge.core.errors import ConfigError
from driftgauge.core.fields import NULL_KEY, RowHashName
from driftgauge.stores import registry

__all__ = ["build", "load_file", "load_text", "parse_duration"]

_SECRET_FIELDS = ("dsn", "password", "tokens")
_RANGE_ERRORS = {
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
    "finite_number",
    "multiple_of",
}
Loc = tuple[str | int, ...]


_MEMBER_TAG = re.compile(r"^(?:function-\w+|literal|list)\[")
"""How pydantic names the member of a plain union (`str | list[str]`) an error is under."""


def _loc(parts: tuple[Any, ...]) -> str:
    """Return a dotted location, dropping pydantic's union-member and key tags."""
    shown = [p for p in parts if p != "[key]" and not _member_tag(p)]
    if len(shown) > 2 and shown[0] == "stores" and shown[2] in registry.kinds():
        del shown[2]
    return ".".join('""' if p == "" else str(p) for p in shown) or "(root)"


def _member_tag(part: Any) -> bool:
    return isinstance(part, str) and _MEMBER_TAG.match(part) is not None


def _problems(errors: list[Any]) -> list[str]:
    """Return one problem per error; a value no member of a union takes: its first's."""
    out: list[str] = []
    unions: set[str] = set()
    for e in errors:
        loc = _loc(tuple(e["loc"]))
        if any(_member_tag(p) for p in e["loc"]):
            if loc in unions:
                continue
            unions.add(loc)
        out.append(f"{loc}: {_message(e)}")
    return out


def _message(err: Any) -> str:
    if err["type"] == "missing":
        return "field required"
    if err["type"] == "extra_forbidden":
        return "unknown key"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if "[key]" in err["loc"]:
        msg = f"(the name) {msg}"
    secret = any(p in _SECRET_FIELDS for p in err["loc"] if isinstance(p, str))
    if err["type"] in _RANGE_ERRORS and not secret and isinstance(err["input"], int | float):
        msg = f"{msg}, got {err['input']!r}"
    return msg


def load_file(path: str | Path, *, resolve_secrets: bool = False) -> Config:
    """Read, validate and build the config at `path`; raise ConfigError listing every problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError([f"{p}: cannot read config ({why})"]) from None
    return load_text(text, source=str(p), resolve_secrets=resolve_secrets)


def load_text(text: str, *, source: str = "<config>", resolve_secrets: bool = False) -> Config:
    """Validate YAML text and build the runtime config, reporting every problem at once."""
    raw, problems = yaml_doc.read(text, source)
    if not isinstance(raw, dict):
        raise ConfigError([*problems, f"{source}: the top level must be a mapping"])
    parsed, found, pruned = _validate(raw)
    problems.extend(found)
    if parsed is None:
        raise ConfigError(problems)
    stores = raw.get("stores")
    known = {str(n) for n in stores} if isinstance(stores, dict) else set()
    try:
        config = build(parsed, resolve_secrets=resolve_secrets, known_stores=known)
    except ConfigError as exc:
        problems.extend(p for p in exc.problems if not _follows_from(p, pruned))
    if problems:
        raise ConfigError(problems)
    return config


def _validate(raw: dict[str, Any]) -> tuple[m.ConfigModel | None, list[str], list[str]]:
    """Validate; on errors, drop the bad values and retry so later checks still run.

    Returns the model (None if nothing usable is left), the problems of the first pass and
    the locations dropped: problems the build finds there follow from the dropped values.
    """
    data = copy.deepcopy(raw)
    problems: list[str] = []
    pruned: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for _ in range(16):
        try:
            return m.ConfigModel.model_validate(data), problems, pruned
        except ValidationError as exc:
            errors = exc.errors()
        if not problems:
            problems = _problems(errors)
        key = tuple(sorted(f"{e['loc']}{e['type']}" for e in errors))
        if key in seen:
            break
        seen.add(key)
        for err in sorted(
            errors, key=lambda e: [(isinstance(p, str), p) for p in e["loc"]], reverse=True
        ):
            # A missing key drops the section that lacks it.
            path = _data_path(data, tuple(err["loc"]))
            pruned.append(_loc(path))
            _drop(data, path)
    return None, problems, pruned


def _data_path(data: Any, loc: Loc) -> Loc:
    """Return the part of a pydantic location that names keys and indexes in `data`."""
    path: list[str | int] = []
    node = data
    for part in loc:
        found = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        )
        if not found:
            continue  # a union-member or key tag, or the missing key itself
        node = node[part]
        path.append(part)
    return tuple(path)


_PLACEHOLDERS: dict[str | int, Any] = {"stores": {}, "state": {"dsn": "-"}, "checks": {}}


def _drop(data: dict[str, Any], path: Loc) -> None:
    """Remove the value at `path` (a top-level section becomes an empty placeholder)."""
    if not path:
        return
    if len(path) == 1:
        data.pop(str(path[0]), None)
        if path[0] in _PLACEHOLDERS:
            data[str(path[0])] = copy.deepcopy(_PLACEHOLDERS[path[0]])
        return
    node: Any = data
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)
    elif isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node):
        del node[path[-1]]


def _follows_from(problem: str, pruned: list[str]) -> bool:
    """Return True if a build problem is at (or just above) a dropped bad value."""
    where = problem.split(": ", 1)[0]
    for p in pruned:
        if where == p or where.startswith(p + ".") or where == p.rsplit(".", 1)[0]:
            return True
        # A dropped entry of a check (a field, say) is named elsewhere in the check too.
        parts = p.split(".")
        if (
            len(parts) > 3
            and parts[0] == "checks"
            and where.startswith(f"checks.{parts[1]}.")
            and where.endswith(f".{parts[-1]}")
        ):
            return True
    return False


def build(
    parsed: m.ConfigModel, *, resolve_secrets: bool = False, known_stores: set[str] | None = None
) -> Config:
    """Check cross-references and turn validated models into runtime objects.

    `known_stores` names stores that exist but were invalid (their problems are reported
    already), so views that use them do not also report an unknown store.
    """
    problems: list[str] = []
    stores: dict[str, Store] = {}
    for name, sm in parsed.stores.items():
        built = registry.kind_of(sm.kind).build(name, sm, problems)
        if sm.max_concurrent_queries is not None:
            built = replace(built, max_concurrent_queries=sm.max_concurrent_queries)  # type: ignore[type-var]
        if sm.parallel_scans != 1:
            built = replace(built, parallel_scans=sm.parallel_scans)  # type: ignore[type-var]
        stores[name] = built
    broken = (known_stores or set()) - set(stores)
    state = State(
        Secret(parsed.state.dsn),
        parsed.state.schema_name,
        Retention(parsed.state.retention.runs, parsed.state.retention.ledger),
        Lease(parsed.state.lease.heartbeat, parsed.state.lease.expires),
        parsed.state.max_concurrent_runs,
    )
    problems.extend(secrets.dsn_problems("state.dsn", parsed.state.dsn))
    api = Api(
        tuple(Secret(t) for t in parsed.api.tokens),
        parsed.api.public_read,
        parsed.api.sample_keys,
        metrics_tokens=tuple(Secret(t) for t in parsed.api.metrics_tokens),
        metrics_public=parsed.api.metrics_public,
        live_concurrency=parsed.api.live_concurrency,
    )
    checks: dict[str, Check] = {}
    if not parsed.checks:
        problems.append("checks: configure at least one check")
    for name, cm in parsed.checks.items():
        check = _build_check(name, cm, stores, broken, problems)
        if check is not None:
            checks[name] = check
    signals.check_shared_jobs(checks, problems)
    if resolve_secrets:
        problems.extend(resolve.resolve_problems(stores, state, api))
    if problems:
        raise ConfigError(problems)
    return Config(stores, state, api, checks)


def _zone(where: str, name: str, problems: list[str]) -> ZoneInfo:
    """Return the check's time zone; an unknown one is a problem (and UTC stands in)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long
        problems.append(f"{where}.timezone: unknown time zone {name!r}")
        return ZoneInfo("UTC")


def _check_rate_reasons(where: str, cm: m.CheckModel, composite: bool, problems: list[str]) -> None:
    """Append a problem for each exclusion-rate tolerance no exclusion rule can produce."""
    reasons = {e.reason for e in cm.exclusions} | ({NULL_KEY} if composite else set())
    for reason in cm.tolerance.exclusion_rate:
        # With a ledger, reasons also come from the sync job's no_match/skipped reports.
        if cm.ledger is None and reason not in reasons:
            problems.append(
                f"{where}.tolerance.exclusion_rate.{reason}: no exclusion has this reason"
            )


def _build_check(
    name: str, cm: m.CheckModel, stores: dict[str, Store], broken: set[str], problems: list[str]
) -> Check | None:
    where = f"checks.{name}"
    before = len(problems)
    tz = _zone(where, cm.timezone, problems)
    fields = tuple(Field(n, t) for n, t in cm.fields.items())
    _check_measures(where, cm, fields, problems)
    key = resolve_key(where, cm, problems)
    _check_rate_reasons(where, cm, key.composite, problems)
    source = _build_view(
        f"{where}.source",
        cm.source,
        cm,
        key,
        fields,
        tz,
        stores,
        broken,
        problems,
        exclusions=cm.exclusions,
        source=True,
    )
    reader = _build_view(
        f"{where}.reader", cm.reader, cm, key, fields, tz, stores, broken, problems, exclusions=[]
    )
    schedule = _build_schedule(f"{where}.schedule", cm.schedule, problems)
    if source is None or reader is None:
        return None
    row_hash = _row_hash(where, cm.row_hash, source, reader, problems)
    source, reader = replace(source, row_hash=row_hash), replace(reader, row_hash=row_hash)
    if key.composite and cm.canary is not None:
        # The sentinel is written and found by one key column.
        problems.append(f"{where}.canary: a check with a composite key cannot have a canary")
    ledger = signals.build_ledger(f"{where}.ledger", cm.ledger, problems)
    canary = signals.build_canary(
        f"{where}.canary", cm.canary, source, reader, stores, broken, problems
    )
    vocabulary = signals.build_vocabulary(
        f"{where}.vocabulary", cm.vocabulary, source, reader, problems
    )
    if len(problems) > before:
        return None
    tol = cm.tolerance
    return Check(
        name=name,
        source=source,
        reader=reader,
        fields=fields,
        key_type=key.types[0],
        key_types=key.types if key.composite else (),
        timezone=tz,
        settle=cm.settle,
        tolerance=Tolerance(
            tol.missing_ratio, tol.extra, tol.mismatched, tuple(sorted(tol.exclusion_rate.items()))
        ),
        drilldown=cm.drilldown,
        schedule=schedule,
        description=cm.description,
        ledger=ledger,
        canary=canary,
        vocabulary=vocabulary,
        volume=signals.build_volume(cm.volume),
        timestamp_precision=cm.timestamp_precision,
        measures=tuple(cm.measures),
    )


def _row_hash(
    where: str, setting: str, source: View, reader: View, problems: list[str]
) -> RowHashName:
    """Return the row hash both sides compute: lookup3 where both kinds can, else md5."""
    able = [registry.kind_of(v.kind).has(registry.LOOKUP3_ROW_HASH) for v in (source, reader)]
    if setting == "md5" or (setting == "auto" and not all(able)):
        return "md5"
    for side, view, ok in (("source", source, able[0]), ("reader", reader, able[1])):
        if not ok:
            kinds = ", ".join(registry.with_capability(registry.LOOKUP3_ROW_HASH))
            problems.append(
                f"{where}.row_hash: a {view.kind} store ({where}.{side}) cannot compute "
                f"lookup3; use md5 or auto (kinds that can: {kinds})"
            )
    return "lookup3"


def _check_measures(
    where: str, cm: m.CheckModel, fields: tuple[Field, ...], problems: list[str]
) -> None:
    """Require each measure to be a distinct integer or decimal field of the check."""
    types = {f.name: f.type for f in fields}
    seen: set[str] = set()
    for i, name in enumerate(cm.measures):
        if name in seen:
            problems.append(f"{where}.measures[{i}]: {name!r} is listed twice")
        seen.add(name)
        if name not in types:
            problems.append(f"{where}.measures[{i}]: {name!r} is not one of the check's fields")
        elif types[name] not in ("integer", "decimal"):
            problems.append(
                f"{where}.measures[{i}]: field {name!r} is {types[name]}; a "
                "measure sums an integer or decimal field"
            )


def _build_view(
    where: str,
    vm: m.ViewModel,
    cm: m.CheckModel,
    key: KeyShape,
    fields: tuple[Field, ...],
    tz: ZoneInfo,
    stores: dict[str, Store],
    broken: set[str],
    problems: list[str],
    exclusions: list[m.ExclusionModel],
    source: bool = False,
) -> View | None:
    store = stores.get(vm.store)
    if store is None and vm.store in broken:
        return None  # the store's own problems are reported
    if store is None:
        known = ", ".join(sorted(stores)) or "none"
        problems.append(f"{where}.store: unknown store {vm.store!r} (known: {known})")
        return None
    for extra in set(vm.fields) - {f.name for f in fields} - set(key.names):
        problems.append(f"{where}.fields.{extra}: not one of the check's fields or key parts")
    if key.composite and not registry.kind_of(store.kind).has(registry.COMPOSITE_KEYS):
        problems.append(
            f"{where}.key: a {store.kind} store cannot compare a composite key; kinds "
            f"that can: {', '.join(registry.with_capability(registry.COMPOSITE_KEYS))}"
        )
    registry.kind_of(store.kind).check_view(where, vm, exclusions, problems)
    if cm.measures and not registry.kind_of(store.kind).has(registry.MEASURE_TOTALS):
        # A side that cannot sum would leave the totals uncompared: refuse, never pass.
        problems.append(
            f"{where.rsplit('.', 1)[0]}.measures: a {store.kind} store cannot sum "
            f"measures exactly ({where}); kinds that can: "
            f"{', '.join(registry.with_capability(registry.MEASURE_TOTALS))}"
        )
    scaled = registry.kind_of(store.kind).has(registry.SCALED_MEASURES)
    if cm.measures and cm.measure_scale is None and scaled:
        # OpenSearch sums exactly only as scaled 64-bit integers: the scale must be known.
        problems.append(
            f"{where.rsplit('.', 1)[0]}.measure_scale: required with measures "
            f"on an {store.kind} side ({where})"
        )
    reasons = [e.reason for e in exclusions]
    if len(set(reasons)) != len(reasons):
        problems.append(f"{where.rsplit('.', 1)[0]}.exclusions: reasons must be unique")
    parts = key.columns(vm)
    rules = tuple(Exclusion(e.reason, e.where, e.query) for e in exclusions)
    if parts and source:
        rules = (null_key_rule(parts), *rules)  # a source row with a NULL part is no key
    return View(
        store=store,
        key_column=parts[0].column if parts else parts_of(vm)[0],
        time_column=vm.time,
        columns=tuple(vm.fields.get(f.name, f.name) for f in fields),
        fields=fields,
        key_type=key.types[0],
        timezone=tz,
        query=vm.query,
        table=vm.table,
        index=vm.index,
        filter=vm.filter,
        exclusions=rules,
        # auto stays at microseconds until the preflight learns what both sides hold.
        timestamp_precision="us" if cm.timestamp_precision == "auto" else cm.timestamp_precision,
        measures=tuple(n for n in dict.fromkeys(cm.measures) if n in {f.name for f in fields}),
        measure_scale=cm.measure_scale,
        key_parts=parts,
    )


def _build_schedule(where: str, sm: m.ScheduleModel, problems: list[str]) -> Schedule:
    recent_every = sm.recent.every if sm.recent is not None else None
    recent_days = sm.recent.days if sm.recent is not None else 7
    full_every, full_cron, full_days = None, None, 400
    if sm.full is not None:
        full_days = sm.full.days
        if (sm.full.every is None) == (sm.full.cron is None):
            problems.append(f"{where}.full: give exactly one of 'every' or 'cron'")
        full_every, full_cron = sm.full.every, sm.full.cron
    return Schedule(recent_every, recent_days, full_every, full_cron, full_days)
