"""Load a YAML config, validate it and build frozen runtime objects."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import ValidationError

from driftgauge.config import model as m
from driftgauge.config import signals
from driftgauge.config.runtime import (
    Api,
    Check,
    Config,
    Drilldown,
    Exclusion,
    Field,
    OpenSearchStore,
    PostgresStore,
    Retention,
    Schedule,
    State,
    Store,
    Tolerance,
    View,
)
from driftgauge.config.secrets import Secret
from driftgauge.errors import ConfigError, SecretError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """Return the timedelta for a duration such as `90s`, `15m`, `2h`, `1d`."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration (use e.g. 30s, 15m, 2h, 1d)")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def _loc(parts: tuple[Any, ...]) -> str:
    """Return a dotted location, dropping pydantic's union-member tags."""
    shown = list(parts)
    if len(shown) > 2 and shown[0] == "stores" and shown[2] in ("postgres", "opensearch"):
        del shown[2]
    return ".".join(str(p) for p in shown) or "(root)"


def _pydantic_problems(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        loc = _loc(tuple(err["loc"]))
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "field required"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key"
        problems.append(f"{loc}: {msg}")
    return problems


def load_file(path: str | Path, *, resolve_secrets: bool = False) -> Config:
    """Read, validate and build the config at `path`; raise ConfigError listing every problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{p}: cannot read config ({exc.strerror})"]) from None
    return load_text(text, source=str(p), resolve_secrets=resolve_secrets)


def load_text(text: str, *, source: str = "<config>", resolve_secrets: bool = False) -> Config:
    """Validate YAML text and build the runtime config."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{source}: not valid YAML ({exc})"]) from None
    if not isinstance(raw, dict):
        raise ConfigError([f"{source}: the top level must be a mapping"])
    try:
        parsed = m.ConfigModel.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_pydantic_problems(exc)) from None
    return build(parsed, resolve_secrets=resolve_secrets)


def build(parsed: m.ConfigModel, *, resolve_secrets: bool = False) -> Config:
    """Check cross-references and turn validated models into runtime objects."""
    problems: list[str] = []
    stores: dict[str, Store] = {}
    for name, sm in parsed.stores.items():
        if isinstance(sm, m.PostgresStoreModel):
            stores[name] = PostgresStore(name, Secret(sm.dsn), sm.timeout_seconds, sm.pool_max)
        else:
            pw = Secret(sm.password) if sm.password is not None else None
            stores[name] = OpenSearchStore(
                name, sm.url.rstrip("/"), sm.username, pw, sm.timeout_seconds, sm.verify_certs
            )
    state = State(Secret(parsed.state.dsn), parsed.state.schema_name,
                  _build_retention("state.retention", parsed.state.retention, problems))
    api = Api(tuple(Secret(t) for t in parsed.api.tokens), parsed.api.public_read,
              parsed.api.sample_keys,
              metrics_tokens=tuple(Secret(t) for t in parsed.api.metrics_tokens),
              metrics_public=parsed.api.metrics_public,
              live_concurrency=parsed.api.live_concurrency)
    checks: dict[str, Check] = {}
    for name, cm in parsed.checks.items():
        check = _build_check(name, cm, stores, problems)
        if check is not None:
            checks[name] = check
    signals.check_shared_jobs(checks, problems)
    if resolve_secrets:
        problems.extend(_secret_problems(stores, state, api))
    if problems:
        raise ConfigError(problems)
    return Config(stores, state, api, checks)


def _build_check(name: str, cm: m.CheckModel, stores: dict[str, Store],
                 problems: list[str]) -> Check | None:
    where = f"checks.{name}"
    before = len(problems)
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", name):
        problems.append(f"{where}: check names use lowercase letters, digits, '_' and '-'")
    try:
        tz = ZoneInfo(cm.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"{where}.timezone: unknown time zone {cm.timezone!r}")
        tz = ZoneInfo("UTC")
    try:
        settle = parse_duration(cm.settle)
    except ValueError as exc:
        problems.append(f"{where}.settle: {exc}")
        settle = timedelta(0)
    fields = tuple(Field(n, t) for n, t in cm.fields.items())
    for reason in cm.tolerance.exclusion_rate:
        # With a ledger, reasons also come from the sync job's no_match/skipped reports.
        if cm.ledger is None and reason not in {e.reason for e in cm.exclusions}:
            problems.append(f"{where}.tolerance.exclusion_rate.{reason}: no exclusion has this "
                            "reason")
    source = _build_view(f"{where}.source", cm.source, cm, fields, tz, stores, problems,
                         exclusions=cm.exclusions)
    reader = _build_view(f"{where}.reader", cm.reader, cm, fields, tz, stores, problems,
                         exclusions=[])
    schedule = _build_schedule(f"{where}.schedule", cm.schedule, problems)
    if source is None or reader is None:
        return None
    ledger = signals.build_ledger(f"{where}.ledger", cm.ledger, problems)
    canary = signals.build_canary(f"{where}.canary", cm.canary, source, reader, stores, problems)
    vocabulary = signals.build_vocabulary(f"{where}.vocabulary", cm.vocabulary, source, reader,
                                          problems)
    if len(problems) > before:
        return None
    tol = cm.tolerance
    return Check(
        name=name, source=source, reader=reader, fields=fields, key_type=cm.key_type,
        timezone=tz, settle=settle,
        tolerance=Tolerance(tol.missing_ratio, tol.extra, tol.mismatched,
                            tuple(sorted(tol.exclusion_rate.items()))),
        drilldown=Drilldown(cm.drilldown.leaf_rows, cm.drilldown.dense_ratio,
                            cm.drilldown.max_depth, cm.drilldown.slot_first_pass_days),
        schedule=schedule, description=cm.description, ledger=ledger, canary=canary,
        vocabulary=vocabulary, volume=signals.build_volume(cm.volume),
        timestamp_precision=cm.timestamp_precision,
    )


def _build_view(where: str, vm: m.ViewModel, cm: m.CheckModel, fields: tuple[Field, ...],
                tz: ZoneInfo, stores: dict[str, Store], problems: list[str],
                exclusions: list[m.ExclusionModel]) -> View | None:
    store = stores.get(vm.store)
    if store is None:
        known = ", ".join(sorted(stores)) or "none"
        problems.append(f"{where}.store: unknown store {vm.store!r} (known: {known})")
        return None
    for extra in set(vm.fields) - {f.name for f in fields}:
        problems.append(f"{where}.fields.{extra}: not one of the check's fields")
    if store.kind == "postgres":
        if (vm.query is None) == (vm.table is None):
            problems.append(f"{where}: a postgres view needs exactly one of 'query' or 'table'")
        for key in ("index", "filter"):
            if getattr(vm, key) is not None:
                problems.append(f"{where}.{key}: only for opensearch views")
        for i, ex in enumerate(exclusions):
            if ex.where is None or ex.query is not None:
                problems.append(f"{where.rsplit('.', 1)[0]}.exclusions.{i}: a postgres source "
                                "excludes rows with 'where' (an SQL predicate)")
    else:
        if vm.index is None:
            problems.append(f"{where}.index: field required for an opensearch view")
        for key in ("query", "table"):
            if getattr(vm, key) is not None:
                problems.append(f"{where}.{key}: only for postgres views")
        for i, ex in enumerate(exclusions):
            if ex.query is None or ex.where is not None:
                problems.append(f"{where.rsplit('.', 1)[0]}.exclusions.{i}: an opensearch source "
                                "excludes rows with 'query' (query DSL)")
    reasons = [e.reason for e in exclusions]
    if len(set(reasons)) != len(reasons):
        problems.append(f"{where.rsplit('.', 1)[0]}.exclusions: reasons must be unique")
    return View(
        store=store, key_column=vm.key, time_column=vm.time,
        columns=tuple(vm.fields.get(f.name, f.name) for f in fields), fields=fields,
        key_type=cm.key_type, timezone=tz, query=vm.query, table=vm.table, index=vm.index,
        filter=vm.filter,
        exclusions=tuple(Exclusion(e.reason, e.where, e.query) for e in exclusions),
        # auto stays at microseconds until the preflight learns what both sides hold.
        timestamp_precision="us" if cm.timestamp_precision == "auto" else cm.timestamp_precision,
    )


def _build_schedule(where: str, sm: m.ScheduleModel, problems: list[str]) -> Schedule:
    recent_every = None
    recent_days = 7
    if sm.recent is not None:
        recent_days = sm.recent.days
        try:
            recent_every = parse_duration(sm.recent.every)
        except ValueError as exc:
            problems.append(f"{where}.recent.every: {exc}")
    full_every, full_cron, full_days = None, None, 400
    if sm.full is not None:
        full_days = sm.full.days
        if (sm.full.every is None) == (sm.full.cron is None):
            problems.append(f"{where}.full: give exactly one of 'every' or 'cron'")
        if sm.full.every is not None:
            try:
                full_every = parse_duration(sm.full.every)
            except ValueError as exc:
                problems.append(f"{where}.full.every: {exc}")
        if sm.full.cron is not None:
            if len(sm.full.cron.split()) != 5:
                problems.append(f"{where}.full.cron: expected 5 fields (min hour dom mon dow)")
            full_cron = sm.full.cron
    return Schedule(recent_every, recent_days, full_every, full_cron, full_days)


def _build_retention(where: str, rm: m.RetentionModel, problems: list[str]) -> Retention:
    kept: dict[str, timedelta] = {}
    for key, text in (("runs", rm.runs), ("ledger", rm.ledger)):
        try:
            kept[key] = parse_duration(text)
        except ValueError as exc:
            problems.append(f"{where}.{key}: {exc}")
            continue
        if kept[key] <= timedelta(0):
            problems.append(f"{where}.{key}: must be longer than 0 (e.g. 30d)")
    return Retention(**kept)


def _secret_problems(stores: dict[str, Store], state: State, api: Api) -> list[str]:
    refs: list[tuple[str, Secret]] = [("state.dsn", state.dsn)]
    for name, store in stores.items():
        if isinstance(store, PostgresStore):
            refs.append((f"stores.{name}.dsn", store.dsn))
        elif store.password is not None:
            refs.append((f"stores.{name}.password", store.password))
    refs.extend((f"api.tokens.{i}", t) for i, t in enumerate(api.tokens))
    refs.extend((f"api.metrics_tokens.{i}", t) for i, t in enumerate(api.metrics_tokens))
    problems = []
    for loc, secret in refs:
        try:
            secret.reveal()
        except SecretError as exc:
            problems.append(f"{loc}: {exc.problems[0]}")
    return problems
