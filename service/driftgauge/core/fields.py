"""The value types a check's key and fields may have, shared by config, encoding and stores."""

from __future__ import annotations

from typing import Literal

FieldType = Literal["string", "integer", "decimal", "boolean", "timestamp"]
KeyType = Literal["string", "integer"]
TimestampPrecision = Literal["ms", "us"]
"""The unit a timestamp field's token is floored to (its text is always microseconds)."""
RowHashName = Literal["md5", "lookup3"]
"""The 64-bit hash of a row encoding: md5's first 8 bytes, or PostgreSQL's hash_bytes_extended."""
ROW_HASHES: tuple[RowHashName, ...] = ("md5", "lookup3")
NULL_KEY = "null_key"
"""The exclusion reason of a source row with a NULL part in its composite key."""
