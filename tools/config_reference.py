"""Write docs/configuration.md from the pydantic config models (run by `make docs`)."""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from driftgauge.config.values import show
from driftgauge.configfile.model import ConfigModel

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

HEADER = """\
# Configuration reference

<!-- Generated from the config models by `make docs` (tools/config_reference.py); do not
edit by hand: a unit test fails when this file and the models disagree. -->

Every key driftgauge's YAML config accepts, section by section, as the models in
`service/driftgauge/configfile/model.py` define them. A key not listed here is refused, and so
is a value outside its range; `driftgauge config validate` names the key and the problem.
Durations are written like `90s`, `15m`, `1h30m` or `2d` (units largest first, each once).
Secrets (`dsn`, `password`, tokens) are an inline value, `env:NAME` or `file:/path`,
resolved at start-up. `<name>` stands for a name you choose.
"""

# What the config's own validators check, by validator function name (values.py).
CHECKS = {
    "_not_blank": "not empty",
    "_secret_ref": "secret: inline, `env:NAME` or `file:/path`",
    "_url": "an http:// or https:// base URL, no credentials",
    "_cron": "a crontab(5) expression",
    "_non_empty_mapping": "a non-empty mapping",
    "_non_empty_list": "at least one value",
}


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _split(tp: Any) -> tuple[Any, list[Any]]:
    """Return a type without its Annotated layers, and their metadata in order."""
    meta: list[Any] = []
    while typing.get_origin(tp) is typing.Annotated:
        tp, *more = typing.get_args(tp)
        meta = [*more, *meta]
    return tp, meta


def _members(tp: Any) -> list[Any]:
    """Return the members of a union, or the type alone."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return list(typing.get_args(tp))
    return [tp]


def _between(meta: Any) -> str | None:
    """Return the range of a duration validator made by values.between."""
    func = getattr(meta, "func", None)
    if func is None or not func.__qualname__.startswith("between."):
        return None
    cells = dict(
        zip(
            func.__code__.co_freevars,
            (c.cell_contents for c in func.__closure__ or ()),
            strict=True,
        )
    )
    return f"{cells['minimum']} to {cells['maximum']}"


def _limits(meta: list[Any]) -> list[str]:
    """Return what the metadata allows, in words (ranges, patterns, validators)."""
    out: list[str] = []
    low = high = None
    for m in meta:
        if isinstance(m, FieldInfo):
            out += _limits(list(m.metadata))
        elif isinstance(m, at.Ge):
            low = f">= {m.ge}"
        elif isinstance(m, at.Gt):
            low = f"> {m.gt}"
        elif isinstance(m, at.Le):
            high = f"<= {m.le}"
        elif isinstance(m, at.Lt):
            high = f"< {m.lt}"
        elif getattr(m, "pattern", None):
            out.append(f"matches `{m.pattern}`")
        elif (span := _between(m)) is not None:
            out.append(span)
        elif word := CHECKS.get(getattr(getattr(m, "func", None), "__name__", "")):
            out.append(word)
    if low or high:
        out.insert(0, ", ".join(x for x in (low, high) if x))
    return out


def _type(tp: Any, meta: list[Any] | None = None) -> str:
    """Return a type in the config's words, with its limits."""
    tp, inner = _split(tp)
    meta = [*(meta or []), *inner]
    parts = [m for m in _members(tp) if m is not type(None)]
    if len(parts) == 1 and typing.get_origin(parts[0]) is typing.Annotated:
        return _type(parts[0], meta)  # `X | None` where X is Annotated
    limits = _limits(meta)
    if len(parts) > 1 and all(_is_model(p) for p in parts):
        text = "one of: " + ", ".join(f"[{_title(p)}](#{_anchor(p)})" for p in parts)
    elif len(parts) > 1:
        text = " or ".join(_type(p) for p in parts)
    else:
        text = _one(parts[0])
    return text + (f" ({'; '.join(limits)})" if limits else "")


def _one(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return ("one of " if len(args) > 1 else "") + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if _is_model(tp):
        return f"section [{_title(tp)}](#{_anchor(tp)})"
    names = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        timedelta: "duration",
        typing.Any: "any",
    }
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _default(info: FieldInfo) -> str:
    """Return a field's default as the config would write it."""
    if info.default_factory is not None:
        made = info.default_factory()  # type: ignore[call-arg]
        if isinstance(made, BaseModel):
            return "its defaults"
        return f"`{made!r}`" if made else ("`[]`" if isinstance(made, list) else "`{}`")
    if info.default is PydanticUndefined:
        return "**required**"
    value = info.default
    if value is None:
        return "unset"
    if isinstance(value, timedelta):
        return f"`{show(value)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if value != "" else '`""`'


def _title(model: type[BaseModel]) -> str:
    kind = model.model_fields.get("kind")
    if kind is not None and typing.get_origin(kind.annotation) is typing.Literal:
        (name,) = typing.get_args(kind.annotation)
        return f"{model.__name__.removesuffix('Model')} (kind: {name})"
    return model.__name__.removesuffix("Model")


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _nested(tp: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """Yield (path suffix, model) for each model a field's type holds."""
    tp, _ = _split(tp)
    for part in _members(tp):
        part, _ = _split(part)
        origin, args = typing.get_origin(part), typing.get_args(part)
        if _is_model(part):
            yield "", part
        elif origin is dict:
            for suffix, model in _nested(args[1]):
                yield ".<name>" + suffix, model
        elif origin is list:
            for suffix, model in _nested(args[0]):
                yield "[]" + suffix, model


def _sections(
    model: type[BaseModel], path: str, found: dict[type[BaseModel], list[str]]
) -> dict[type[BaseModel], list[str]]:
    """Return each model below `model`, depth first, with every path it stands at."""
    first = model not in found
    found.setdefault(model, []).append(path or "(top level)")
    if first:
        for name, info in model.model_fields.items():
            key = info.alias or name
            for suffix, inner in _nested(info.annotation):
                _sections(inner, f"{path}.{key}{suffix}".lstrip("."), found)
    return found


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    """Return the reference as Markdown."""
    out = [HEADER]
    for model, paths in _sections(ConfigModel, "", {}).items():
        out.append(f'<a id="{_anchor(model)}"></a>\n')
        out.append(f"## {_title(model)}\n")
        out.append(
            "The top level of the file.\n"
            if paths == ["(top level)"]
            else "At " + ", ".join(f"`{p}`" for p in paths) + ".\n"
        )
        doc = (model.__doc__ or "").strip()
        if doc and not doc.startswith("Base for") and model.__base__ is not BaseModel:
            out.append(_cell(doc) + "\n")
        out.append("| key | type | default | description |\n|---|---|---|---|")
        for name, info in model.model_fields.items():
            out.append(
                f"| `{info.alias or name}` | {_cell(_type(info.annotation, info.metadata))}"
                f" | {_default(info)} | {_cell(info.description or '')} |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    """Write the reference to docs/configuration.md, or the path given."""
    target = Path(argv[0]) if argv else DOC
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
