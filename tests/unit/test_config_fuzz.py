"""Every field of the config gets bad values; each is refused, by location, in one pass."""

from __future__ import annotations

import copy
import random
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from driftgauge.configfile import model as m
from driftgauge.core.errors import ConfigError
from driftgauge.startup import load_service_config
from tests.config_fuzz import CASES, DUPLICATE_PROBLEM, ENV, base, duplicated_key_text


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DG_FUZZ_UNSET", raising=False)


def problems_of(text: str, tmp_path: Path) -> list[str]:
    """Return the problems `serve` and `config validate` both report for a config text."""
    f = tmp_path / "dg.yml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_service_config(f)
    return err.value.problems


def test_the_base_config_is_valid(tmp_path: Path) -> None:
    f = tmp_path / "dg.yml"
    f.write_text(yaml.safe_dump(base()))
    check = load_service_config(f).checks["reviews"]
    assert check.canary is not None and check.ledger is not None and check.volume is not None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_bad_value_is_refused_at_its_location(case: Any, tmp_path: Path) -> None:
    got = problems_of(case.text(), tmp_path)
    assert any(p.startswith(case.problem) for p in got), got
    assert all(": " in p for p in got)


def test_a_duplicated_key_is_refused_not_silently_overwritten(tmp_path: Path) -> None:
    got = problems_of(duplicated_key_text(), tmp_path)
    assert any(p.startswith(DUPLICATE_PROBLEM) for p in got), got


def _models(annotation: Any) -> list[type[BaseModel]]:
    """Return the config models inside a field annotation (through lists, dicts, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out = []
    for arg in typing.get_args(annotation):
        out.extend(_models(arg))
    return out


def _fields(model: type[BaseModel]) -> set[tuple[str, str]]:
    """Return (model, field) for every field reachable from `model`."""
    found: set[tuple[str, str]] = set()
    stack, seen = [model], set()
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for name, info in cur.model_fields.items():
            found.add((cur.__name__, info.alias or name))
            stack.extend(_models(info.annotation))
    return found


def _fields_on(path: str) -> set[tuple[str, str]]:
    """Return the (model, field) pairs a case's path passes through or sets."""
    data: Any = base()
    model: type[BaseModel] = m.ConfigModel
    parts = path.split(".")
    out = set()
    i = 0
    while i < len(parts):
        name = parts[i]
        info = next((f for n, f in model.model_fields.items() if (f.alias or n) == name), None)
        if info is None:  # an unknown key
            break
        out.add((model.__name__, name))
        inner = _models(info.annotation)
        if i == len(parts) - 1 or not inner:
            break
        data = data[name]
        args = [a for a in typing.get_args(info.annotation) if a is not type(None)]
        origin = typing.get_origin(info.annotation)
        if origin in (typing.Union, types.UnionType):
            origin = typing.get_origin(args[0])
        if origin in (dict, list):  # the next part is a key or an index
            i += 1
            data = data[int(parts[i])] if origin is list else data[parts[i]]
        if len(inner) > 1:  # the store union: pick by kind
            inner = [
                c
                for c in inner
                if typing.get_args(c.model_fields["kind"].annotation) == (data["kind"],)
            ]
        model = inner[0]
        i += 1
    return out


def test_every_field_of_the_config_models_has_a_bad_value() -> None:
    covered = set().union(*(_fields_on(c.path) for c in CASES))
    missing = sorted(_fields(m.ConfigModel) - covered)
    assert not missing, f"add a bad value for each of: {missing}"


SEVERAL = """
stores:
  pg: {kind: postgres, dsn: "env:DG_FUZZ_UNSET", colour: blue}
  os: {kind: opensearch, url: "env:OS_URL"}
state: {dsn: "postgresql://u@127.0.0.1:1/state", retention: {runs: 0s}}
api: {tokens: [""]}
checks:
  reviews:
    source: {store: pg, table: tasks, key: task_id, time: ts}
    reader: {store: nowhere, index: conv, key: task_id, time: ts}
    timezone: Mars/Olympus
    settle: 9999999999d
    tolerance: {missing_ratio: 5}
    schedule: {recent: {every: 0s}, full: {cron: "0 99 * * 0"}}
  orders:
    source: {store: pg, table: orders, key: id, time: ts}
    reader: {store: os, index: orders, key: id, time: ts}
    settle: 1h
    settle: 2h
    canary: {store: os, every: 0s}
"""


def test_every_problem_of_a_config_comes_in_one_pass(tmp_path: Path) -> None:
    got = problems_of(SEVERAL, tmp_path)
    want = [
        "checks.orders.settle: duplicated key",
        "stores.pg.colour: unknown key",
        "stores.os.url: must be a URL, not a secret reference",
        "state.retention.runs: must be at least 1h, got 0s",
        "api.tokens.0: must not be empty",
        "checks.reviews.settle: '9999999999d' is longer than 100 years",
        "checks.reviews.tolerance.missing_ratio: Input should be less than or equal to 1",
        "checks.reviews.schedule.recent.every: must be at least 1s, got 0s",
        "checks.reviews.schedule.full.cron: hour: 99 is out of range 0-23",
        "checks.orders.canary.every: must be at least 1m, got 0s",
        # Found by the cross-reference checks, in the same pass:
        "checks.reviews.timezone: unknown time zone 'Mars/Olympus'",
        "checks.reviews.reader.store: unknown store 'nowhere'",
        "stores.pg.dsn: environment variable DG_FUZZ_UNSET is not set",
    ]
    for problem in want:
        assert any(p.startswith(problem) for p in got), (problem, got)
    # The invalid store `pg` and the dropped values cause no follow-on problems.
    assert not any("unknown store 'pg'" in p or "unknown store 'os'" in p for p in got), got
    assert len(got) == len(want), got


JUNK: list[Any] = [
    None,
    "",
    " ",
    0,
    -1,
    1.5,
    float("inf"),
    float("nan"),
    True,
    [],
    {},
    [1],
    {"a": 1},
    "x" * 300,
    "env:",
    "file:\x00",
    "file:/",
    "0s",
    "* * * * *",
    10**30,
    "\N{COLLISION SYMBOL}",
    {"": None},
    [None],
    "env:DG_FUZZ_UNSET",
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else []
    )
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def test_junk_anywhere_is_a_config_error_never_a_crash(tmp_path: Path) -> None:
    """Put junk at every place of the base config (a seeded sample): ConfigError or valid."""
    rng = random.Random(16)
    f = tmp_path / "dg.yml"
    tried = 0
    for path in _paths(base()):
        for junk in rng.sample(JUNK, 1):
            data = base()
            node: Any = data
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = copy.deepcopy(junk)
            f.write_text(yaml.safe_dump(data))
            tried += 1
            try:
                load_service_config(f)
            except ConfigError as exc:
                assert exc.problems and all(": " in p for p in exc.problems), exc.problems
    assert tried > 100
