"""Secret references (`env:NAME`, `file:/path`) that never print their value."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from driftgauge.errors import SecretError


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
        return self.ref
