"""Resolve every secret reference of a built config, as `serve` will, naming each failure."""

from __future__ import annotations

from collections.abc import Mapping

from driftgauge.config.frozen import Api, State, Store
from driftgauge.config.secrets import Secret, dsn_shape, is_reference
from driftgauge.core.errors import SecretError
from driftgauge.stores import registry


def resolve_problems(stores: Mapping[str, Store], state: State, api: Api) -> list[str]:
    """Resolve every secret reference as `serve` does; return each failure by location."""
    refs: list[tuple[str, Secret, str]] = [("state.dsn", state.dsn, "dsn")]
    for name, store in stores.items():
        refs.extend(
            (f"stores.{name}.{field}", secret, kind)
            for field, secret, kind in registry.kind_of(store.kind).secrets(store)
        )
    refs.extend((f"api.tokens.{i}", t, "token") for i, t in enumerate(api.tokens))
    refs.extend((f"api.metrics_tokens.{i}", t, "token") for i, t in enumerate(api.metrics_tokens))
    problems = []
    for loc, secret, kind in refs:
        try:
            value = secret.reveal()
        except SecretError as exc:
            problems.append(f"{loc}: {exc.problems[0]}")
            continue
        if kind == "token" and not value.strip():
            problems.append(f"{loc}: the token is empty")
        elif kind == "dsn" and is_reference(secret.ref):
            shape = dsn_shape(value)
            if shape is not None:
                problems.append(f"{loc}: {secret.describe()} {shape}")
    return problems
