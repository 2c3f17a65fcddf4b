"""The canonical row encoding and its hashes: the reference every store must match.

See docs/digest.md for the specification. PostgreSQL (SQL in stores/postgres/dialect.py) and
OpenSearch (Painless in stores/digest.painless) compute the same bytes inside the
store; this module is the pure-Python reference and the golden-vector oracle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation

from driftgauge.core.aggregate import Aggregate
from driftgauge.core.clock import EPOCH
from driftgauge.core.fields import FieldType, KeyType, RowHashName, TimestampPrecision
from driftgauge.encoding.lookup3 import hash_bytes_extended

MASK64 = (1 << 64) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_MICROSECOND = timedelta(microseconds=1)
STEP_MICROS: dict[TimestampPrecision, int] = {"ms": 1000, "us": 1}
"""Microseconds per step of each timestamp precision."""

Value = str | int | Decimal | float | bool | datetime | date | None


def encode_value(value: Value, type_: FieldType, precision: TimestampPrecision = "us") -> str:
    """Return the self-delimiting token of one value; timestamps floor to `precision`."""
    if value is None:
        return "N"
    if type_ == "string":
        text = _as_text(value)
        return f"S{len(text)}:{text}"
    if type_ == "integer":
        return f"I{_as_int64(value)};"
    if type_ == "decimal":
        return f"D{plain_decimal(value)};"
    if type_ == "boolean":
        if not isinstance(value, bool):
            raise TypeError(f"boolean value expected, got {type(value).__name__}")
        return "T" if value else "F"
    if type_ == "timestamp":
        return f"M{truncate_micros(epoch_micros(value), precision)};"
    raise ValueError(f"unknown field type {type_!r}")


def key_encoding(key: str | int | None, key_type: KeyType) -> str:
    """Return the canonical encoding of a key."""
    return encode_value(key, key_type)


def row_encoding(
    key: str | int | None,
    key_type: KeyType,
    values: Sequence[Value],
    types: Sequence[FieldType],
    precision: TimestampPrecision = "us",
) -> str:
    """Return the canonical encoding of a row: key token, then one token per field in order."""
    if len(values) != len(types):
        raise ValueError(f"{len(values)} values for {len(types)} fields")
    return key_encoding(key, key_type) + "".join(
        encode_value(v, t, precision) for v, t in zip(values, types, strict=True)
    )


def key_hash(encoding: str) -> str:
    """Return the 32 lowercase hex digits of md5 over a key encoding's UTF-8 bytes."""
    return hashlib.md5(encoding.encode("utf-8"), usedforsecurity=False).hexdigest()


def row_hash(encoding: str, algorithm: RowHashName = "md5") -> int:
    """Return the unsigned 64-bit hash of a row encoding's UTF-8 bytes under `algorithm`.

    md5: its first 8 bytes, big-endian. lookup3: PostgreSQL's hashtextextended(encoding, 0).
    """
    data = encoding.encode("utf-8")
    if algorithm == "lookup3":
        return hash_bytes_extended(data)
    if algorithm != "md5":
        raise ValueError(f"unknown row hash {algorithm!r}")
    return int.from_bytes(hashlib.md5(data, usedforsecurity=False).digest()[:8], "big")


def key_text(key: str | int | None) -> str:
    """Return a key's canonical text: the string itself or the integer's decimal form."""
    if key is None:
        return ""
    return key if isinstance(key, str) else str(_as_int64(key))


def hash_row(
    key: str | int | None,
    key_type: KeyType,
    values: Sequence[Value],
    types: Sequence[FieldType],
    precision: TimestampPrecision = "us",
    algorithm: RowHashName = "md5",
) -> tuple[str, int]:
    """Return (key_hash, row_hash) of one row; the key hash is always md5's (prefixes)."""
    return (
        key_hash(key_encoding(key, key_type)),
        row_hash(row_encoding(key, key_type, values, types, precision), algorithm),
    )


def aggregate(rows: Iterable[tuple[str, int]]) -> Aggregate:
    """Return count, distinct keys and digest of (key_hash, row_hash) pairs."""
    count = 0
    total = 0
    keys: set[str] = set()
    for khash, rhash in rows:
        count += 1
        total += rhash
        keys.add(khash)
    return Aggregate(count=count, distinct_keys=len(keys), digest=total & MASK64)


def unsigned64(value: int) -> int:
    """Return a (possibly signed) 64-bit integer, or an exact sum of them, mod 2^64."""
    return value & MASK64


def plain_decimal(value: Value) -> str:
    """Return a decimal's canonical text: plain digits, no exponent, no trailing zeros."""
    if isinstance(value, bool):
        raise TypeError("decimal value expected, got bool")
    if isinstance(value, float):
        # repr is the shortest text that round-trips, which is what the stores print.
        number = Decimal(repr(value))
    elif isinstance(value, int | Decimal):
        number = Decimal(value)
    elif isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(f"{value!r} is not a decimal number") from None
    else:
        raise TypeError(f"decimal value expected, got {type(value).__name__}")
    if number.is_nan():
        return "NaN"
    if number.is_infinite():
        return "-Infinity" if number < 0 else "Infinity"
    if number.is_zero():
        return "0"
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def epoch_micros(value: Value) -> int:
    """Return a timestamp's instant as integer microseconds since 1970-01-01T00:00:00Z."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 timestamp") from None
    if isinstance(value, datetime):
        instant = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    elif isinstance(value, date):
        instant = datetime.combine(value, time(), tzinfo=UTC)
    else:
        raise TypeError(f"timestamp value expected, got {type(value).__name__}")
    return (instant - EPOCH) // _MICROSECOND


def truncate_micros(micros: int, precision: TimestampPrecision) -> int:
    """Return epoch microseconds floored to a whole step of `precision` (down, also before 1970)."""
    step = STEP_MICROS[precision]
    return micros // step * step


def from_epoch_micros(micros: int) -> datetime:
    """Return the aware UTC datetime of integer epoch microseconds."""
    return EPOCH + timedelta(microseconds=micros)


def _as_text(value: Value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"string value expected, got {type(value).__name__}")


def _as_int64(value: Value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str | Decimal):
        raise TypeError(f"integer value expected, got {type(value).__name__}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an integer") from None
    if isinstance(value, Decimal) and number != value:
        raise ValueError(f"{value} is not an integer")
    if not INT64_MIN <= number <= INT64_MAX:
        raise ValueError(f"{number} is outside the 64-bit integer range")
    return number
