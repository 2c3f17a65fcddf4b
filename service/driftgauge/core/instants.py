"""One written form for instants in every answer: ISO 8601 in UTC with the offset `+00:00`.

The state rows' `isoformat()` already writes this; pydantic would write `Z` for the same
instant, so models with instants declare them as `Instant`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import PlainSerializer, WithJsonSchema


def instant_text(moment: datetime) -> str:
    """Return an aware instant in UTC as `YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00`."""
    if moment.tzinfo is None:
        raise ValueError(f"instant {moment.isoformat()} has no time zone")
    return moment.astimezone(UTC).isoformat()


Instant = Annotated[
    datetime,
    PlainSerializer(instant_text, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}, mode="serialization"),
]
