"""`driftgauge serve` listens on DRIFTGAUGE_PORT (the image's healthcheck asks the same)."""

import pytest

from driftgauge.cli import _parser


def test_the_port_comes_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DRIFTGAUGE_PORT", "9123")
    assert _parser().parse_args(["serve"]).port == 9123
    assert _parser().parse_args(["serve", "--port", "8181"]).port == 8181
    monkeypatch.delenv("DRIFTGAUGE_PORT")
    assert _parser().parse_args(["serve"]).port == 8080


def test_a_bad_port_in_the_environment_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRIFTGAUGE_PORT", "eighty")
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["serve"])
    assert exc.value.code == 2
    assert "--port: invalid int value: 'eighty'" in capsys.readouterr().err
