"""Config text for unit tests: stores and state ahead of the checks, and what a refusal says."""

from __future__ import annotations

import pytest

from driftgauge.config.frozen import State
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError

# Unit tests load config and never dial a store; port 1 refuses at once should one ever try,
# and no address here reaches the shared local stack.
ADDRESSES = {
    "postgres": 'dsn: "postgresql://u@127.0.0.1:1/{name}"',
    "mariadb": 'dsn: "mysql://u@127.0.0.1:1/{name}"',
    "opensearch": 'url: "http://127.0.0.1:1"',
    "duckdb": "database: /tmp/{name}.duckdb",
}


def store_line(name: str, spec: str) -> str:
    """Return the `stores:` entry for `name` from "kind" or "kind, more: settings"."""
    kind, _, more = spec.partition(",")
    address = ADDRESSES[kind.strip()].format(name=name)
    return f"  {name}: {{kind: {kind.strip()}, {address}{',' + more if more else ''}}}"


def config_head(state: str = "", **stores: str) -> str:
    """Return config text up to `checks:`, declaring `stores` (name=kind) and a state database."""
    # `state` goes inside the state mapping after its DSN, as in ", lease: {expires: 2m}".
    lines = ["stores:", *(store_line(name, spec) for name, spec in stores.items())]
    lines += [f'state: {{dsn: "postgresql://u@127.0.0.1:1/state"{state}}}', "checks:"]
    return "\n".join(lines)


def config_problems(text: str) -> list[str]:
    """Return the problems, each led by its location, of a config text the loader refuses."""
    with pytest.raises(ConfigError) as err:
        load_text(text)
    return err.value.problems


ONE_CHECK = """
  orders:
    source: {store: src, table: orders, key: id, time: created_at}
    reader: {store: src, table: orders_copy, key: id, time: created_at}
"""
"""The body of one check comparing a table with its copy in the store `src`."""


def state_config(key: str, value: str = "") -> str:
    """Return a minimal one-check config with `key: value` in its state section, if a value."""
    return config_head(f", {key}: {value}" if value else "", src="postgres") + ONE_CHECK


def loaded_state(key: str, value: str = "") -> State:
    """Return the state settings loaded from state_config(key, value)."""
    return load_text(state_config(key, value)).state
