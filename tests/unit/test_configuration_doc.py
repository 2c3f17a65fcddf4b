"""docs/configuration.md is the config models' reference: it must say what they accept."""

from __future__ import annotations

from tools.config_reference import DOC, render


def test_the_configuration_reference_matches_the_config_models() -> None:
    if DOC.read_text(encoding="utf-8") != render():
        raise AssertionError(
            "docs/configuration.md differs from the config models: "
            "run `make docs` and commit the result"
        )


def test_the_reference_names_every_key_of_a_nested_section() -> None:
    text = render()
    for key in (
        "`stores.<name>`",
        "`state.lease`",
        "`checks.<name>.schedule.full`",
        "`checks.<name>.exclusions[]`",
        "`checks.<name>.vocabulary.<name>`",
    ):
        assert key in text, key
    assert "| `heartbeat` | duration (1s to 10m) | `15s` |" in text
    assert "| `pool_max` | integer (>= 1, <= 100) | `4` |" in text
