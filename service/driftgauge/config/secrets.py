"""Secret references (`env:NAME`, `file:/path`) that never print their value."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from driftgauge.core.errors import SecretError

if TYPE_CHECKING:
    from driftgauge.config.runtime import Api, State, Store


@dataclass(frozen=True)
class Secret:
    """A reference to a secret; `reveal()` resolves it, `repr` never shows it."""

    ref: str

    def __repr__(self) -> str:
        return f"Secret({self.describe()})"

    __str__ = __repr__

    def describe(self) -> str:
        """Return a safe description of where the secret comes from."""
        if self.ref.startswith(("env:", "file:")):
            return self.ref
        return "inline value"

    def reveal(self) -> str:
        """Return the secret's value, or raise SecretError naming the reference."""
        if self.ref.startswith("env:"):
            name = self.ref[4:]
            value = os.environ.get(name)
            if value is None:
                raise SecretError([f"environment variable {name} is not set"])
            return value
        if self.ref.startswith("file:"):
            path = Path(self.ref[5:])
            try:
                return path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise SecretError([f"secret file {path} cannot be read ({exc.strerror})"]) from None
            except ValueError:          # not UTF-8, or a NUL in the path
                raise SecretError([f"secret file {self.ref[5:]!r} cannot be read (not a "
                                   "path to UTF-8 text)"]) from None
        return self.ref


def _is_reference(value: str) -> bool:
    return value.startswith(("env:", "file:"))


def _dsn_shape(value: str) -> str | None:
    """Return why `value` is no PostgreSQL URL (without showing it), or None."""
    try:
        scheme = urlsplit(value.strip()).scheme
    except ValueError:
        scheme = ""
    if scheme not in ("postgresql", "postgres"):
        return "must be a postgresql:// URL (the value is not shown)"
    return None


def dsn_problems(where: str, dsn: str) -> list[str]:
    """Return the problem of an inline DSN; a reference is checked when it is resolved."""
    problem = None if _is_reference(dsn) else _dsn_shape(dsn)
    return [f"{where}: {problem}"] if problem else []


def resolve_problems(stores: Mapping[str, Store], state: State, api: Api) -> list[str]:
    """Resolve every secret reference as `serve` does; return each failure by location."""
    from driftgauge.config.runtime import PostgresStore

    refs: list[tuple[str, Secret, str]] = [("state.dsn", state.dsn, "dsn")]
    for name, store in stores.items():
        if isinstance(store, PostgresStore):
            refs.append((f"stores.{name}.dsn", store.dsn, "dsn"))
        elif store.password is not None:
            refs.append((f"stores.{name}.password", store.password, "password"))
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
        elif kind == "dsn" and _is_reference(secret.ref):
            shape = _dsn_shape(value)
            if shape is not None:
                problems.append(f"{loc}: {secret.describe()} {shape}")
    return problems
