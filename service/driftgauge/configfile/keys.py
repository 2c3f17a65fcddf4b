"""Resolve a check's key: one column per side, or a composite key's parts and their types."""

from __future__ import annotations

from dataclasses import dataclass

from driftgauge.config.frozen import KeyColumn
from driftgauge.configfile import model as m
from driftgauge.core.fields import NULL_KEY, KeyType


@dataclass(frozen=True)
class KeyShape:
    """The key both sides share: its part names (empty: one column per side) and types."""

    names: tuple[str, ...]
    types: tuple[KeyType, ...]

    @property
    def composite(self) -> bool:
        """Return True when the key has two or more parts."""
        return len(self.names) > 1

    def columns(self, vm: m.ViewModel) -> tuple[KeyColumn, ...]:
        """Return a side's key parts, each part's column through the side's `fields`."""
        if not self.composite:
            return ()
        return tuple(
            KeyColumn(name, vm.fields.get(name, name), type_)
            for name, type_ in zip(self.names, self.types, strict=True)
        )


def parts_of(vm: m.ViewModel) -> list[str]:
    """Return a side's key as a list of parts (a one-column key is one part)."""
    return [vm.key] if isinstance(vm.key, str) else list(vm.key)


def resolve_key(where: str, cm: m.CheckModel, problems: list[str]) -> KeyShape:
    """Return the check's key shape; problems name the field and the part that is wrong."""
    src, rdr = parts_of(cm.source), parts_of(cm.reader)
    types = [cm.key_type] if isinstance(cm.key_type, str) else list(cm.key_type)
    if len(src) == 1 and len(rdr) == 1:
        if len(types) != 1:
            problems.append(
                f"{where}.key_type: {len(types)} types for a one-column key; give one type"
            )
        return KeyShape((), (types[0],))
    for side, parts in (("source", src), ("reader", rdr)):
        seen: set[str] = set()
        for i, name in enumerate(parts):
            if name in seen:
                problems.append(f"{where}.{side}.key[{i}]: key part {name!r} is listed twice")
            seen.add(name)
    if len(src) != len(rdr):
        problems.append(
            f"{where}.reader.key: {len(rdr)} part(s), the source's key has {len(src)} "
            f"({', '.join(src)}); both sides name the same parts, each side's column "
            "through its fields"
        )
    else:
        for i, (s_name, r_name) in enumerate(zip(src, rdr, strict=True)):
            if s_name != r_name:
                problems.append(
                    f"{where}.reader.key[{i}]: {r_name!r} is not the source's key part "
                    f"{s_name!r}; name the same parts on both sides and map this side's "
                    f"column in reader.fields (e.g. {s_name}: {r_name})"
                )
    if len(types) == 1:
        types = types * len(src)
    elif len(types) != len(src):
        problems.append(
            f"{where}.key_type: {len(types)} types for a key of {len(src)} parts "
            f"({', '.join(src)}); give one type, or one per part"
        )
        types = (types + ["string"] * len(src))[: len(src)]
    for i, ex in enumerate(cm.exclusions):
        if ex.reason == NULL_KEY:
            problems.append(
                f"{where}.exclusions[{i}].reason: {NULL_KEY!r} is the reason of the rows "
                "with a NULL key part; name this rule otherwise"
            )
    return KeyShape(tuple(src), tuple(types))
