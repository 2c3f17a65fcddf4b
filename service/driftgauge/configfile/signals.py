"""Build a check's ledger, canary, vocabulary and volume settings; every error names its place."""

from __future__ import annotations

from collections.abc import Mapping

from driftgauge.config.frozen import (
    Canary,
    Check,
    Ledger,
    Store,
    View,
    VocabularyField,
    Volume,
)
from driftgauge.configfile import model as m
from driftgauge.stores import registry
from driftgauge.stores.opensearch import querydsl

DEFAULT_CANARY_CRON = "0 12 * * *"


def build_ledger(where: str, lm: m.LedgerModel | None, problems: list[str]) -> Ledger | None:
    """Return the runtime ledger settings of a check, or None when it has none."""
    if lm is None:
        return None
    return Ledger(lm.job, lm.summary_deadline, lm.no_match_rate, lm.settle)


def build_canary(
    where: str,
    cm: m.CanaryModel | None,
    source: View,
    reader: View,
    stores: Mapping[str, Store],
    broken: set[str],
    problems: list[str],
) -> Canary | None:
    """Return the runtime canary of a check, or None when it has none."""
    if cm is None:
        return None
    store = stores.get(cm.store)
    if store is None and cm.store in broken:
        pass  # the store's own problems are reported
    elif store is None:
        known = ", ".join(sorted(stores)) or "none"
        problems.append(f"{where}.store: unknown store {cm.store!r} (known: {known})")
    elif not registry.kind_of(store.kind).has(registry.CANARY_WRITER):
        problems.append(
            f"{where}.store: the canary writes to OpenSearch; store {cm.store!r} is {store.kind}"
        )
    check_where = where.rsplit(".", 1)[0]
    if not registry.kind_of(reader.kind).has(registry.CANARY_WRITER):
        problems.append(f"{where}: the canary reads back through an opensearch reader view")
    elif not querydsl.excludes_marker(reader.filter, cm.marker):
        problems.append(
            f"{check_where}.reader.filter: must hide canary sentinels with a top-level "
            f"bool.must_not clause {{exists: {{field: {cm.marker}}}}} (see docs/canary.md)"
        )
    index = cm.index or reader.index
    if index is None:
        problems.append(f"{where}.index: field required when the reader has no index")
    every = cm.every
    if cm.every is not None and cm.cron is not None:
        problems.append(f"{where}: give at most one of 'every' or 'cron'")
    cron = cm.cron if cm.cron is not None or every is not None else DEFAULT_CANARY_CRON
    for name in (cm.marker, reader.key_column):
        if name in cm.document:
            problems.append(
                f"{where}.document.{name}: set by the canary itself (marker and "
                "real key); remove it"
            )
    if cm.key_query is not None and not registry.kind_of(source.kind).has(registry.KEY_PICKER):
        kinds = " or ".join(registry.with_capability(registry.KEY_PICKER))
        problems.append(f"{where}.key_query: only for a {kinds} source")
    if (
        store is None
        or not registry.kind_of(store.kind).has(registry.CANARY_WRITER)
        or index is None
    ):
        return None
    return Canary(
        store=store,
        index=index,
        document=dict(cm.document),
        marker=cm.marker,
        write=cm.write,
        every=every,
        cron=cron,
        timeout=cm.timeout_seconds,
        key_query=cm.key_query,
    )


def build_vocabulary(
    where: str,
    vm: Mapping[str, m.VocabularyFieldModel],
    source: View,
    reader: View,
    problems: list[str],
) -> tuple[VocabularyField, ...]:
    """Return the vocabulary fields of a check, each with the reader's accepted values."""
    if vm and not registry.kind_of(source.kind).has(registry.VOCABULARY_COUNTER):
        kinds = " or ".join(registry.with_capability(registry.VOCABULARY_COUNTER))
        problems.append(f"{where}: the vocabulary check needs a {kinds} source")
        return ()
    out = []
    names = [f.name for f in source.fields]
    for name, fm in vm.items():
        if name not in names:
            problems.append(f"{where}.{name}: not one of the check's fields")
            continue
        i = names.index(name)
        filter_field = fm.filter_field or reader.columns[i]
        if fm.accepted is not None:
            accepted = tuple(sorted({querydsl.canonical_value(v) for v in fm.accepted}))
        elif reader.index is not None:  # a query DSL reader: opensearch, elasticsearch
            found = querydsl.accepted_terms(reader.filter, filter_field)
            if found is None:
                problems.append(
                    f"{where}.{name}.accepted: the reader filter has no term or "
                    f"terms clause on {filter_field!r}; list the accepted values"
                )
                continue
            accepted = found
        else:
            problems.append(f"{where}.{name}.accepted: field required for a {reader.kind} reader")
            continue
        out.append(VocabularyField(name, source.columns[i], reader.columns[i], accepted))
    return tuple(out)


def build_volume(vm: m.VolumeModel | None) -> Volume | None:
    """Return the volume band settings of a check, or None when it has none."""
    return Volume(vm.trailing, vm.sigmas, vm.min_history) if vm is not None else None


def check_shared_jobs(checks: Mapping[str, Check], problems: list[str]) -> None:
    """Require checks fed by one sync job to agree on how that job's windows are judged."""
    first: dict[str, Check] = {}
    for name, check in checks.items():
        if check.ledger is None:
            continue
        seen = first.setdefault(check.ledger.job, check)
        if seen is check or seen.ledger is None:
            continue
        a, b = seen.ledger, check.ledger
        same = str(seen.timezone) == str(check.timezone) and (
            a.summary_deadline,
            a.no_match_rate,
        ) == (b.summary_deadline, b.no_match_rate)
        if not same:
            problems.append(
                f"checks.{name}.ledger.job: job {b.job!r} also feeds check {seen.name!r} with a "
                "different timezone, summary_deadline or no_match_rate; they must agree"
            )
