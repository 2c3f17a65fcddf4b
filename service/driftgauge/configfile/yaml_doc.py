"""Read a YAML config document, reporting duplicated keys instead of letting the last win."""

from __future__ import annotations

from typing import Any

import yaml


def read(text: str, source: str) -> tuple[Any, list[str]]:
    """Return the document's data and its duplicated-key problems; raise ConfigError if no YAML."""
    from driftgauge.core.errors import ConfigError

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{source}: not valid YAML ({exc})"]) from None
    finally:
        loader.dispose()
    problems: list[str] = []
    if node is not None:
        _duplicates(node, (), problems)
    return data, problems


def _duplicates(node: yaml.Node, path: tuple[str, ...], problems: list[str]) -> None:
    if len(path) > 64:
        return  # an alias that contains itself
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            if isinstance(key, yaml.ScalarNode) and key.tag.endswith(":merge"):
                continue
            line = key.start_mark.line + 1
            if name in first:
                where = ".".join((*path, name))
                problems.append(
                    f"{where}: duplicated key (lines {first[name]} and {line}); remove one"
                )
            else:
                first[name] = line
            _duplicates(value, (*path, name), problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _duplicates(item, (*path, str(i)), problems)
