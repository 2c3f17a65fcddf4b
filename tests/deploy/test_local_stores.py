"""Store addresses are named in one place, and a run refuses another checkout's stores."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tools.local_stores import NAMES, ROOT, address

STANDARD = ("55432", "53306", "9250", "9260")
MOVED = {
    "DRIFTGAUGE_PG_PORT": "59532",
    "DRIFTGAUGE_MARIADB_PORT": "59306",
    "DRIFTGAUGE_OS_PORT": "9291",
    "DRIFTGAUGE_ES_PORT": "9292",
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NAMES and k not in MOVED}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def test_moved_ports_move_every_address_tests_benches_and_demos_use() -> None:
    code = "from tools.local_stores import NAMES, address\nfor n in NAMES: print(n, address(n))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(**MOVED), capture_output=True, text=True, check=True
    ).stdout
    got = dict(line.split(" ", 1) for line in out.splitlines())
    assert set(got) == set(NAMES)
    for name, value in got.items():
        assert any(f":{port}" in value for port in MOVED.values()), (name, value)
        assert not any(f":{port}" in value for port in STANDARD), (name, value)


def test_no_test_bench_or_demo_falls_back_to_a_standard_port() -> None:
    fallback = re.compile(r'os\.environ\.get\(\s*"DRIFTGAUGE_TEST_' + r'\w+",\s*"')
    offenders = [
        str(p.relative_to(ROOT))
        for top in ("tests", "bench", "deploy")
        for p in (ROOT / top).rglob("*.py")
        if fallback.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def _pytest(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_cron.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.integration
def test_a_run_refuses_a_store_another_checkout_started(tmp_path: Path) -> None:
    # Seen from a checkout whose stores live in tmp_path, the running stack (this
    # checkout's) is someone else's: the run stops before any test, naming the variable.
    foreign = _pytest(_env(DRIFTGAUGE_LOCAL_DIR=str(tmp_path)))
    assert foreign.returncode == 4, foreign.stdout + foreign.stderr
    text = foreign.stdout + foreign.stderr
    assert "DRIFTGAUGE_TEST_PG_DSN" in text and "another checkout" in text
    # Named explicitly, the same server is the run's choice.
    named = {n: os.environ[n] for n in NAMES if n in os.environ}
    dsn = address("DRIFTGAUGE_TEST_PG_DSN")
    named_env = _env(DRIFTGAUGE_LOCAL_DIR=str(tmp_path), **named)
    named_env["DRIFTGAUGE_TEST_PG_DSN"] = dsn.rsplit("/", 1)[0] + "/template1"
    for n in NAMES:
        if n != "DRIFTGAUGE_TEST_PG_DSN":
            named_env[n] = "http://127.0.0.1:1" if "URL" in n else "mysql://root@127.0.0.1:1/x"
    ok = _pytest(named_env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # And this checkout's own stores pass the check.
    own = _pytest(_env())
    assert own.returncode == 0, own.stdout + own.stderr


@pytest.mark.parametrize(
    ("target", "stores"), [("demo", "postgres opensearch"), ("demo-backfill", "postgres")]
)
def test_a_demo_starts_only_the_stores_it_uses(target: str, stores: str) -> None:
    """`make demo` on a fresh machine must not wait for Trino's 800 MB or Spark's wheel."""
    out = subprocess.run(
        ["make", "-n", target], cwd=ROOT, env=_env(), capture_output=True, text=True, check=True
    ).stdout
    starts = [line.split() for line in out.splitlines() if "stack.sh" in line]
    assert starts == [["deploy/local/stack.sh", "start", *stores.split()]], out
    assert "services" not in out.split("stack.sh", 1)[0]


def test_the_stack_refuses_an_unknown_store_by_name() -> None:
    proc = subprocess.run(
        [str(ROOT / "deploy/local/stack.sh"), "start", "postgres", "redis"],
        env=_env(DRIFTGAUGE_LOCAL_DIR=str(ROOT / ".local")),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "unknown store 'redis'" in proc.stderr + proc.stdout
    assert "postgres" in proc.stderr + proc.stdout  # names what it knows; started nothing
    assert "up on" not in proc.stderr + proc.stdout


def _shell(script: str, tmp_path: Path, marker: str) -> subprocess.CompletedProcess[str]:
    """Run `script` with the stack's shared functions, in a shell with job control (`set -m`)."""
    # The marker travels in the environment: a command line naming it would be stopped too.
    common = ROOT / "deploy/local/common.sh"
    return subprocess.run(
        ["bash", "-c", f"set -m; source {common}; {script}"],
        env=_env(DRIFTGAUGE_LOCAL_DIR=str(tmp_path), MARKER=marker),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_stop_finds_a_server_whose_pid_file_names_a_launcher_that_exited(tmp_path: Path) -> None:
    # With job control a background job leads its own group, so setsid forks and exits: the
    # pid file names a dead launcher while the server runs on. Spark and Trino start this way.
    marker = f"{tmp_path}/server-marker"
    pidfile = tmp_path / "server.pid"
    started = _shell(
        f"setsid bash -c 'sleep 300; exit 0' \"$MARKER\" </dev/null >/dev/null 2>&1 &"
        f" echo $! >{pidfile}; sleep 1",
        tmp_path,
        marker,
    )
    assert started.returncode == 0, started.stderr
    alive = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert alive.returncode == 0, "the stand-in server did not start"
    # (The exited launcher may linger as a zombie, which `kill -0` still calls alive.)
    assert pidfile.read_text().strip() not in alive.stdout.split(), "setsid did not fork"
    stopped = _shell(f'stop_server fake {pidfile} "$MARKER"', tmp_path, marker)
    assert stopped.returncode == 0, stopped.stderr
    assert "fake stopped" in stopped.stderr
    gone = subprocess.run(["pgrep", "-f", marker], capture_output=True, check=False)
    assert gone.returncode == 1, "the server outlived stop"
    assert not pidfile.exists()
    again = _shell(f'stop_server fake {pidfile} "$MARKER"', tmp_path, marker)
    assert "fake not running" in again.stderr
