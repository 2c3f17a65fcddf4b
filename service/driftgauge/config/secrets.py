"""Secret references (`env:NAME`, `file:/path`) that never print their value."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from driftgauge.core.errors import SecretError


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
            except ValueError:  # not UTF-8, or a NUL in the path
                raise SecretError(
                    [f"secret file {self.ref[5:]!r} cannot be read (not a path to UTF-8 text)"]
                ) from None
        return self.ref


def is_reference(value: str) -> bool:
    """Return True when `value` names a secret (`env:` or `file:`) rather than holding it."""
    return value.startswith(("env:", "file:"))


def dsn_shape(value: str) -> str | None:
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
    problem = None if is_reference(dsn) else dsn_shape(dsn)
    return [f"{where}: {problem}"] if problem else []
