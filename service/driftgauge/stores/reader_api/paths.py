"""Dotted JSON paths (`data.items`, `attributes.amount`, `tags.0`) into parsed JSON (no I/O)."""

from __future__ import annotations

from typing import Any

MISSING = object()
"""What `lookup` returns where the path leads nowhere (a JSON null is None)."""


def lookup(doc: Any, path: str) -> Any:
    """Return the value at `path` in `doc`, or MISSING; '' (or '$') is the document itself."""
    if path in ("", "$"):
        return doc
    here = doc
    for part in path.removeprefix("$.").split("."):
        if isinstance(here, dict):
            if part not in here:
                return MISSING
            here = here[part]
        elif isinstance(here, list) and part.isdigit() and int(part) < len(here):
            here = here[int(part)]
        else:
            return MISSING
    return here
