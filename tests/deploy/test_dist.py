"""The release artifacts: wheel and sdist built, installed from the lock into a fresh venv, run.

`python -m build` writes the sdist and then builds the wheel from that sdist, so both are
checked at once. The artifacts land in `dist/` (what `make dist` leaves for a release);
the install goes into a new venv, never the repo's .venv, with PYTHONPATH cleared, so
what runs is what a user gets. The check it runs is a real PostgreSQL -> PostgreSQL one
on the local server, on a database of its own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import uuid
import zipfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest
import yaml
from deploy_support import CHART, ROOT, run
from packaging.requirements import Requirement
from tools.local_stores import address

import driftgauge

pytestmark = pytest.mark.integration

DIST = ROOT / "dist"
LOCK = ROOT / "requirements.lock"
WHEELHOUSE = ROOT / ".local" / "wheelhouse"
# What building the lock's sdist-only packages needs (pip builds them in isolation).
BUILD_BACKENDS = ("setuptools>=77", "wheel")
PACKAGE = ROOT / "service" / "driftgauge"
PG = address("DRIFTGAUGE_TEST_PG_DSN")
BASE = datetime(2026, 4, 1, tzinfo=UTC)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)")

CONFIG = """
stores:
  pg: {{kind: postgres, dsn: "{dsn}"}}
state: {{dsn: "{dsn}"}}
checks:
  copied:
    source: {{store: pg, table: tasks, key: task_id, time: completed_at}}
    reader: {{store: pg, table: tasks_copy, key: task_id, time: completed_at}}
    fields: {{label: string}}
    settle: 0s
"""


def _package_files() -> set[str]:
    """Return the files the wheel must carry: every module and the package data."""
    patterns = (
        "**/*.py",
        "py.typed",
        "state/migrations/*.sql",
        "stores/*.painless",
        "api/static/*",
        "api/static/swagger/*",
    )
    files = {p for pattern in patterns for p in PACKAGE.glob(pattern)}
    return {
        "driftgauge/" + p.relative_to(PACKAGE).as_posix()
        for p in files
        if "__pycache__" not in p.parts and p.is_file()
    }


def _env() -> dict[str, str]:
    """Return the environment without anything pointing at the source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def artifacts() -> tuple[Path, Path]:
    """Build the sdist and, from it, the wheel into dist/; return (wheel, sdist)."""
    DIST.mkdir(exist_ok=True)
    for old in [*DIST.glob("driftgauge-*.whl"), *DIST.glob("driftgauge-*.tar.gz")]:
        old.unlink()
    result = run([sys.executable, "-m", "build", "--outdir", str(DIST), str(ROOT)], timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [wheel] = DIST.glob("driftgauge-*.whl")
    [sdist] = DIST.glob("driftgauge-*.tar.gz")
    return wheel, sdist


def _pip(home: Path, *args: str, timeout: float = 600) -> None:
    """Run this interpreter's pip against the venv at `home`; fail with its output."""
    cmd = [sys.executable, "-m", "pip", "--python", str(home / "bin" / "python"), *args]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=_env(), check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def venv(artifacts: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Install the locked dependencies and then the wheel into a new venv; return its bin."""
    home = tmp_path_factory.mktemp("dist-venv")
    done = run([sys.executable, "-m", "venv", "--without-pip", str(home)], timeout=120)
    assert done.returncode == 0, done.stderr
    # The lock's wheels are kept in .local/wheelhouse: a warm run installs offline, and
    # --require-hashes checks every file against the lock either way.
    offline = [
        "install",
        "-q",
        "--no-index",
        "--find-links",
        str(WHEELHOUSE),
        "--require-hashes",
        "-r",
        str(LOCK),
    ]
    try:
        _pip(home, *offline)
    except AssertionError:
        _pip(home, "download", "-q", "--require-hashes", "-r", str(LOCK), "-d", str(WHEELHOUSE))
        # A locked package published only as an sdist (pyspark-client) is built on install:
        # its build backend must be in the wheelhouse too, or the offline install cannot.
        _pip(home, "download", "-q", "-d", str(WHEELHOUSE), *BUILD_BACKENDS)
        _pip(home, *offline)
    _pip(home, "install", "-q", "--no-deps", "--no-index", str(artifacts[0]))
    # The lock alone satisfies what the wheel declares: nothing missing or conflicting.
    _pip(home, "check", timeout=120)
    return home / "bin"


def test_wheel_carries_every_module_and_the_package_data_but_no_demo(
    artifacts: tuple[Path, Path],
) -> None:
    with zipfile.ZipFile(artifacts[0]) as wheel:
        names = set(wheel.namelist())
    shipped = {n for n in names if n.startswith("driftgauge/")}
    assert shipped == _package_files(), shipped ^ _package_files()
    assert any(n.startswith("driftgauge/state/migrations/") and n.endswith(".sql") for n in shipped)
    assert any(n.endswith(".painless") for n in shipped)
    # The demo drops databases: it must never be importable from an installed driftgauge.
    assert not [n for n in names if "demo" in n.lower()]
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert f"driftgauge-{driftgauge.__version__}.dist-info/" in metadata


def test_sdist_carries_the_sources_but_no_demo(artifacts: tuple[Path, Path]) -> None:
    with tarfile.open(artifacts[1]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md"} <= names
    assert {"service/" + f for f in _package_files()} <= names
    assert not [n for n in names if "demo" in n.lower()]


def test_lock_pins_every_dependency_with_hashes() -> None:
    text = LOCK.read_text(encoding="utf-8")
    pins = {
        m.group(1).lower().replace("_", "-"): m.group(2)
        for m in map(_PIN.match, text.splitlines())
        if m
    }
    # Each pin is a line of its own followed by its indented --hash lines.
    entries = re.split(r"\n(?=\S)", text)
    pinned = [e for e in entries if _PIN.match(e)]
    assert len(pinned) == len(pins) > len(_pyproject_dependencies())
    unhashed = [e.split()[0] for e in pinned if "--hash=sha256:" not in e]
    assert not unhashed, f"pins without hashes: {unhashed}"
    assert "--find-links" not in text and "--index-url" not in text, "the lock names a machine"
    declared = _pyproject_dependencies()
    for requirement in declared:
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is in pyproject.toml but not in requirements.lock"
        assert requirement.specifier.contains(pins[name]), (name, pins[name])


def _pyproject_dependencies() -> list[Requirement]:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [Requirement(r) for r in data["project"]["dependencies"]]


def test_installed_version_is_the_package_and_chart_version(venv: Path) -> None:
    done = subprocess.run(
        [str(venv / "driftgauge"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"driftgauge {driftgauge.__version__}"
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    # The chart's default image tag is its appVersion: it must name this release.
    assert chart["appVersion"] == driftgauge.__version__
    where = subprocess.run(
        [str(venv / "python"), "-c", "import driftgauge; print(driftgauge.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        cwd=venv,
        check=False,
    )
    assert str(venv.parent) in where.stdout and str(ROOT / "service") not in where.stdout


@pytest.fixture
async def config(tmp_path: Path) -> AsyncIterator[Path]:
    """Write a PG -> PG config whose reader copy lacks one row; drop the database after."""
    name = f"dg_dist_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = PG.rsplit("/", 1)[0] + "/" + name
    rows = [
        (f"t{i:03d}", "a" if i % 2 else "b", BASE + timedelta(minutes=20 * i)) for i in range(100)
    ]  # about 33 hours
    try:
        conn = await asyncpg.connect(dsn)
        try:
            for table in ("tasks", "tasks_copy"):
                await conn.execute(
                    f"CREATE TABLE {table} (task_id text PRIMARY KEY, "
                    "label text, completed_at timestamptz)"
                )
            await conn.copy_records_to_table("tasks", records=rows)
            await conn.copy_records_to_table(
                "tasks_copy", records=[r for r in rows if r[0] != "t042"]
            )
        finally:
            await conn.close()
        path = tmp_path / "dg.yml"
        path.write_text(CONFIG.format(dsn=dsn))
        yield path
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def test_installed_cli_finds_the_missing_row(venv: Path, config: Path) -> None:
    done = subprocess.run(
        [
            str(venv / "driftgauge"),
            "check",
            "copied",
            "--config",
            str(config),
            "--since",
            "2026-04-01",
            "--until",
            "2026-04-02",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=config.parent,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["status"] == "drift"
    assert sum(b["missing"] for b in out["buckets"]) == 1
    assert sum(b["extra"] + b["mismatched"] for b in out["buckets"]) == 0
    assert sum(b["expected"] for b in out["buckets"]) == 100
    [day] = [b for b in out["buckets"] if b["missing"]]
    assert day["status"] == "drift"


def test_installed_serve_answers_the_page_and_its_assets(venv: Path, config: Path) -> None:
    port = _free_port()
    log = config.parent / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(venv / "driftgauge"),
                "serve",
                "--config",
                str(config),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            cwd=config.parent,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log)
        page = httpx.get(f"{url}/", timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "default-src 'self'" in page.headers["content-security-policy"]
        # The page, its script and style, and the docs' Swagger UI all come from the wheel.
        for asset in re.findall(r'(?:src|href)="(static/[^"]+)"', page.text):
            assert httpx.get(f"{url}/{asset}", timeout=10).status_code == 200, asset
        docs = httpx.get(f"{url}/docs", timeout=10)
        refs = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
        assert docs.status_code == 200 and refs, docs.text[:500]
        assert all(r.startswith("/static/swagger/") for r in refs), refs  # no CDN
        for asset in refs:
            assert httpx.get(f"{url}{asset}", timeout=10).status_code == 200, asset
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")[-2000:]
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"serve from the wheel never got ready, see {log}")
