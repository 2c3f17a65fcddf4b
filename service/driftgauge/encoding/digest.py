"""The canonical row encoding and its hashes: the reference every store must match.

See docs/digest.md for the specification. PostgreSQL (SQL in stores/postgres/dialect.py) and
OpenSearch (Painless in stores/digest.painless) compute the same bytes inside the
store; this module is the pure-Python reference and the golden-vector oracle.
"""

from __future__ import annotations

import hashlib
import json
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
KeyPart = str | int | None
Key = KeyPart | tuple[KeyPart, ...]
"""A key: one value, or a composite key's parts in the check's key order."""
KeyTypes = KeyType | tuple[KeyType, ...]
"""A key's type: one, or one per part of a composite key."""


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


def key_encoding(key: Key, key_type: KeyTypes) -> str:
    """Return the canonical encoding of a key: its token, or a composite key's tuple token."""
    if isinstance(key, tuple) or isinstance(key_type, tuple):
        if not isinstance(key, tuple) or not isinstance(key_type, tuple):
            raise TypeError("a composite key needs a tuple of parts and a tuple of types")
        return tuple_encoding(key, key_type)
    return encode_value(key, key_type)


def tuple_encoding(parts: Sequence[KeyPart], types: Sequence[KeyType]) -> str:
    """Return `K<n>:` and the token of each of the n parts: a composite key's encoding.

    The part count and each self-delimiting token make it unambiguous: ("a", "bc") is
    `K2:S1:aS2:bc`, ("ab", "c") is `K2:S2:abS1:c`. A NULL part encodes as `N` here (a
    reader's row may hold one); a source excludes such a row under core.fields.NULL_KEY instead.
    """
    if len(parts) != len(types):
        raise ValueError(f"{len(parts)} key parts for {len(types)} key types")
    if len(parts) < 2:
        raise ValueError("a composite key has at least two parts")
    tokens = (encode_value(v, t) for v, t in zip(parts, types, strict=True))
    return f"K{len(parts)}:" + "".join(tokens)


def has_null_part(key: Key) -> bool:
    """Return True when a composite key has a NULL part (its source row is excluded)."""
    return isinstance(key, tuple) and any(part is None for part in key)


def tuple_text(parts: Sequence[KeyPart]) -> str:
    """Return a composite key's canonical text: a compact JSON array of its parts."""
    shown = [p if p is None or isinstance(p, str) else _as_int64(p) for p in parts]
    return json.dumps(shown, ensure_ascii=False, separators=(",", ":"))


def parse_tuple_encoding(encoding: str) -> tuple[KeyPart, ...]:
    """Return the parts of a composite key encoding (the inverse of tuple_encoding)."""
    head, sep, rest = encoding.partition(":")
    if not sep or not head.startswith("K") or not head[1:].isdigit():
        raise ValueError(f"{encoding[:40]!r} is not a composite key encoding")
    parts: list[KeyPart] = []
    pos = 0
    for _ in range(int(head[1:])):
        tag = rest[pos : pos + 1]
        if tag == "N":
            parts.append(None)
            pos += 1
        elif tag == "S":
            colon = rest.index(":", pos)
            size = int(rest[pos + 1 : colon])
            parts.append(rest[colon + 1 : colon + 1 + size])
            pos = colon + 1 + size
        elif tag == "I":
            semi = rest.index(";", pos)
            parts.append(int(rest[pos + 1 : semi]))
            pos = semi + 1
        else:
            raise ValueError(f"{encoding[:40]!r}: a key part must be S, I or N, got {tag!r}")
    if pos != len(rest):
        raise ValueError(f"{encoding[:40]!r}: text after the last key part")
    return tuple(parts)


def composite_key_text(encoding: str) -> str:
    """Return the canonical text of the composite key a tuple encoding holds."""
    return tuple_text(parse_tuple_encoding(encoding))


def key_from_text(text: str, key_type: KeyTypes) -> Key:
    """Return the key a key text names (a composite key's: its JSON array of parts)."""
    if not isinstance(key_type, tuple):
        return int(text) if key_type == "integer" else text
    parts = json.loads(text)
    if not isinstance(parts, list) or len(parts) != len(key_type):
        raise ValueError(f"{text[:40]!r} is not a JSON array of {len(key_type)} key parts")
    out: list[KeyPart] = []
    for part, type_ in zip(parts, key_type, strict=True):
        wrong = isinstance(part, bool) or not isinstance(part, int if type_ == "integer" else str)
        if part is not None and wrong:
            raise TypeError(f"{text[:40]!r}: part {part!r} is not of type {type_}")
        out.append(part)
    return tuple(out)


def exported_key(text: str | None, composite: bool) -> str | None:
    """Return a row's key text as a store exported it: a composite key's arrives encoded."""
    return composite_key_text(text) if composite and text is not None else text


def shown_key(text: str | None, composite: bool) -> str | list[KeyPart] | None:
    """Return a key's text as the API and CLI show it: a composite key as a JSON array."""
    if text is None or not composite:
        return text
    parts = json.loads(text)
    if not isinstance(parts, list):
        raise ValueError(f"{text[:40]!r} is not a composite key's text")
    return parts


def row_encoding(
    key: Key,
    key_type: KeyTypes,
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


def key_text(key: Key) -> str:
    """Return a key's canonical text: the string, the integer's decimal form, or a tuple's."""
    if key is None:
        return ""
    if isinstance(key, tuple):
        return tuple_text(key)
    return key if isinstance(key, str) else str(_as_int64(key))


def hash_row(
    key: Key,
    key_type: KeyTypes,
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


def assume_utc(moment: datetime) -> datetime:
    """Return an aware datetime as it is and a zoneless one read as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def iso_instant(text: str, what: str = "") -> datetime:
    """Return ISO 8601 text as an instant (UTC when zoneless); `what` starts the error."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{what}{text!r} is not an ISO 8601 timestamp") from None
    return assume_utc(moment)


def epoch_micros(value: Value) -> int:
    """Return a timestamp's instant as integer microseconds since 1970-01-01T00:00:00Z."""
    if isinstance(value, str):
        instant = iso_instant(value)
    elif isinstance(value, datetime):
        instant = assume_utc(value)
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
