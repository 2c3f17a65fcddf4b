"""One page of a list: how every list of the API and its store reads are paged."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    """At most `limit` items, after skipping the first `offset` (the next page: offset + limit)."""

    limit: int
    offset: int = 0
