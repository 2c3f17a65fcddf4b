"""Config validation: every problem named by its location, secrets never printed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from driftgauge.cli import main
from driftgauge.configfile.loader import load_file, load_text
from driftgauge.core.errors import ConfigError

EXAMPLE = Path(__file__).parents[2] / "deploy" / "examples" / "driftgauge.yml"


def test_example_config_is_valid(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("DRIFTGAUGE_API_TOKEN", "REVIEW_SYNC_PASSWORD"):
        monkeypatch.setenv(name, "s3cr3t-value")
    for name in ("TASKS_DSN", "DRIFTGAUGE_STATE_DSN"):
        monkeypatch.setenv(name, "postgresql://u:s3cr3t@db/x")
    assert main(["config", "validate", str(EXAMPLE)]) == 0
    assert "ok (1 checks" in capsys.readouterr().out
    check = load_file(EXAMPLE).checks["reviews"]
    assert check.reader.columns == ("review_tier",)
    assert check.source.exclusions[0].reason == "no_join_key"
    assert str(check.timezone) == "Europe/Berlin"


BROKEN = """
stores:
  tasks_db: {kind: postgres, dsn: "file:/nonexistent/secret", colour: blue}
  search: {kind: opensearch, url: "http://x", password: "env:DG_MISSING_PASSWORD"}
state: {dsn: "env:DG_STATE"}
checks:
  reviews:
    source: {store: tasks_db, table: tasks, key: id, time: ts}
    reader: {store: nowhere, index: conv, time: ts}
    timezone: Mars/Olympus
    fields: {label: string}
"""
SECRET_PROBLEMS = (
    "stores.tasks_db.dsn: secret file /nonexistent/secret cannot be read",
    "stores.search.password: environment variable DG_MISSING_PASSWORD is not set",
)
"""BROKEN's two secret problems: reported on every pass, whatever else is wrong."""


def refused(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Return what `config validate` printed on refusing the file at `path` (exit 2)."""
    assert main(["config", "validate", str(path)]) == 2
    return capsys.readouterr().out


def repaired(reader: str = "{store: search, index: conv, key: id, time: ts}") -> str:
    """Return BROKEN with its store, time zone and reader problems fixed, reading `reader`."""
    return (
        BROKEN.replace(", colour: blue", "")
        .replace("reader: {store: nowhere, index: conv, time: ts}", f"reader: {reader}")
        .replace("Mars/Olympus", "UTC")
    )


def test_broken_config_reports_every_problem_by_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DG_STATE", "postgresql://u:topsecret@h/db")
    f = tmp_path / "broken.yml"
    f.write_text(BROKEN)
    out = refused(f, capsys)
    # Cross-reference and secret problems come in the same pass; the check whose reader
    # lacks a key cannot be built, so fixing that shows its own cross-reference problems.
    first = ["stores.tasks_db.colour: unknown key", "checks.reviews.reader.key: field required"]
    assert [p for p in [*first, *SECRET_PROBLEMS] if p not in out] == []
    fixed = BROKEN.replace(", colour: blue", "").replace("index: conv,", "index: conv, key: id,")
    f.write_text(fixed)
    out = refused(f, capsys)
    second = [
        "checks.reviews.timezone: unknown time zone 'Mars/Olympus'",
        "checks.reviews.reader.store: unknown store 'nowhere'",
    ]
    assert [p for p in [*second, *SECRET_PROBLEMS] if p not in out] == []
    assert "topsecret" not in out


def test_view_kind_rules() -> None:
    text = repaired("{store: search, table: conv, key: id, time: ts}")
    with pytest.raises(ConfigError) as err:
        load_text(text)
    problems = err.value.problems
    assert "checks.reviews.reader.index: field required for an opensearch view" in problems
    assert "checks.reviews.reader.table: only for postgres views" in err.value.problems


def test_bad_durations_and_cron_are_named() -> None:
    text = repaired() + "    settle: soon\n    schedule: {full: {cron: '* *'}}\n"
    with pytest.raises(ConfigError) as err:
        load_text(text)
    assert any(
        p.startswith("checks.reviews.settle: 'soon' is not a duration") for p in err.value.problems
    )
    assert (
        "checks.reviews.schedule.full.cron: expected 5 fields (minute hour day-of-month "
        "month day-of-week), got 2 in '* *'" in err.value.problems
    )


def test_not_yaml_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.yml"
    f.write_text("checks: [unclosed")
    assert "not valid YAML" in refused(f, capsys)
    assert "cannot read config" in refused(tmp_path / "absent.yml", capsys)


def test_secret_repr_hides_value() -> None:
    from driftgauge.config.secrets import Secret

    s = Secret("postgresql://u:pw@h/db")
    assert "pw" not in repr(s) and "pw" not in str(s)
    assert s.reveal() == "postgresql://u:pw@h/db"


def test_drilldown_limits_are_named() -> None:
    base = repaired()
    check = load_text(
        base + "    drilldown: {slot_first_pass_days: 0}\n", resolve_secrets=False
    ).checks["reviews"]
    assert check.drilldown.slot_first_pass_days == 0
    assert (
        load_text(base, resolve_secrets=False).checks["reviews"].drilldown.slot_first_pass_days
        == 62
    )
    with pytest.raises(ConfigError) as err:
        load_text(
            base + "    drilldown: {slot_first_pass_days: -1, leaf_row: 5}\n", resolve_secrets=False
        )
    problems = "\n".join(err.value.problems)
    assert "checks.reviews.drilldown.slot_first_pass_days" in problems
    assert "greater than or equal to 0" in problems
    assert "checks.reviews.drilldown.leaf_row: unknown key" in problems


def test_an_unexpected_failure_exits_3_never_the_drift_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import driftgauge.cli as cli

    def broken(args: object) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "_run", broken)
    assert main(["check", "reviews", "--config", "dg.yml"]) == 3
    assert "error: internal error" in capsys.readouterr().err


def test_a_reader_that_closes_stdout_early_gets_141_and_no_traceback() -> None:
    import subprocess
    import sys

    # Far more than a pipe buffer, so the write meets the closed pipe.
    code = (
        "import sys, driftgauge.cli as cli\n"
        "cli._run = lambda args: (print('x' * 1_000_000), 0)[1]\n"
        "sys.exit(cli.main(['check', 'reviews', '--config', 'dg.yml']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "service")}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10) == b"x" * 10
    proc.stdout.close()  # the reader leaves, as `| head -c 10` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "internal error" not in err


def test_a_secret_file_that_is_not_text_is_a_secret_error(tmp_path: Path) -> None:
    from driftgauge.config.secrets import Secret
    from driftgauge.core.errors import SecretError

    f = tmp_path / "dsn"
    f.write_bytes(b"\xff\xfe\x00")
    for ref in (f"file:{f}", "file:/tmp/\x00"):
        with pytest.raises(SecretError, match="cannot be read"):
            Secret(ref).reveal()
