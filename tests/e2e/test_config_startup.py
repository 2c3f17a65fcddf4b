"""`config validate` and `serve` refuse the same bad configs with the same message, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.config_fuzz import (
    DUPLICATE_PROBLEM,
    ENV,
    SUBPROCESS,
    Case,
    base,
    duplicated_key_text,
)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def python_module(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `python -m module args` in the checkout with `env`, capturing its output as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=ROOT,
    )


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would, with the fuzz secrets in its environment."""
    env = {**os.environ, **ENV}
    env.pop("DG_FUZZ_UNSET", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "service"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return python_module("driftgauge.cli", *args, env=env)


def both(text: str, tmp_path: Path, name: str) -> tuple[Any, Any]:
    """Return the results of `config validate` and of `serve` on one config text."""
    f = tmp_path / f"{name}.yml"
    f.write_text(text)
    with ThreadPoolExecutor(2) as pool:
        validate = pool.submit(run, "config", "validate", str(f))
        serve = pool.submit(run, "serve", "--config", str(f), "--host", "127.0.0.1", "--port", "1")
        return validate.result(), serve.result()


def assert_refused(problem: str, validate: Any, serve: Any) -> None:
    assert validate.returncode == 2, (validate.returncode, validate.stdout, validate.stderr)
    assert any(line.startswith(problem) for line in validate.stdout.splitlines()), validate.stdout
    assert serve.returncode == 2, (serve.returncode, serve.stderr[-2000:])
    assert any(line.startswith(f"error: {problem}") for line in serve.stderr.splitlines()), (
        serve.stderr[-2000:]
    )
    for out in (validate.stdout, validate.stderr, serve.stdout, serve.stderr):
        assert "Traceback" not in out


@pytest.mark.parametrize("case", SUBPROCESS, ids=lambda c: c.id)
def test_validate_and_serve_refuse_alike(case: Case, tmp_path: Path) -> None:
    assert_refused(case.problem, *both(case.text(), tmp_path, "case"))


def test_a_duplicated_key_is_refused_by_both(tmp_path: Path) -> None:
    assert_refused(DUPLICATE_PROBLEM, *both(duplicated_key_text(), tmp_path, "dup"))


def test_validate_passes_the_base_config_and_documents_exit_codes(tmp_path: Path) -> None:
    f = tmp_path / "ok.yml"
    f.write_text(yaml.safe_dump(base()))
    done = run("config", "validate", str(f))
    assert done.returncode == 0, done.stdout + done.stderr
    # The base config gains a store with every new kind: count it, don't pin it.
    assert f"ok (1 checks, {len(base()['stores'])} stores)" in done.stdout
    helped = run("--help")
    assert "1 drift" in helped.stdout and "2 error" in helped.stdout


def test_an_unreadable_config_is_an_error_not_drift(tmp_path: Path) -> None:
    for args in (
        ["config", "validate", str(tmp_path / "absent.yml")],
        ["check", "reviews", "--config", str(tmp_path / "absent.yml")],
    ):
        done = run(*args)
        assert done.returncode == 2, done.stderr
        assert "cannot read config" in done.stdout + done.stderr
    env = {**os.environ, "PYTHONPATH": str(ROOT / "service")}
    server = python_module("driftgauge.server", "--config", str(tmp_path / "absent.yml"), env=env)
    assert server.returncode == 2 and "cannot read config" in server.stderr, server.stderr
