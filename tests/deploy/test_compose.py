"""Static checks of deploy/compose.yml, its config files and the Dockerfile."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import ROOT, env_references, require_promtool, run

from driftgauge.cli import _parser
from driftgauge.configfile.loader import load_file, load_text

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yml"
DEMO = DEPLOY / "compose" / "demo.py"
DOCKERFILE = ROOT / "Dockerfile"
SERVICES = {"postgres", "opensearch", "driftgauge", "demo", "prometheus", "grafana"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """Parse the compose file once per module."""
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return data


def _bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Return container path → host path for a service's bind mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target] = (DEPLOY / source).resolve()
    return mounts


def _host_path(service: dict[str, Any], container_path: str) -> Path:
    """Map a path inside a service's container to the repo file mounted there."""
    for target, host in sorted(_bind_mounts(service).items(), key=lambda kv: -len(kv[0])):
        if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
            return host / Path(container_path).relative_to(target)
    raise AssertionError(f"{container_path} is not mounted from the repo")


def test_compose_has_every_service_with_an_image(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == SERVICES
    for name, service in compose["services"].items():
        assert service.get("image") or service.get("build"), f"{name}: no image or build"
        if "build" in service:
            context = (DEPLOY / service["build"]["context"]).resolve()
            assert (context / service["build"].get("dockerfile", "Dockerfile")).is_file()
    assert compose["services"]["driftgauge"]["build"]["context"] == ".."


def test_every_mounted_path_exists(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (DEPLOY / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in declared, f"{name}: named volume {source} not declared"


def test_demo_runs_once_from_the_driftgauge_image(compose: dict[str, Any]) -> None:
    demo = compose["services"]["demo"]
    assert demo["image"] == compose["services"]["driftgauge"]["image"]
    # The image's ENTRYPOINT is `driftgauge`; the demo is a Python script, so reset it.
    assert demo["entrypoint"] == []
    # The demo drops databases: it is not in the package, the compose file mounts it.
    python, script = demo["command"]
    assert python == "python"
    assert _host_path(demo, script) == DEMO
    assert demo["restart"] == "no"
    assert demo["depends_on"]["driftgauge"]["condition"] == "service_healthy"


def test_demo_script_imports_the_package_and_writes_a_valid_config() -> None:
    spec = importlib.util.spec_from_file_location("compose_demo", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines main(); runs nothing
    assert callable(module.main)
    text = module.CONFIG.format(
        pg="postgresql://u@h/db",
        os="http://h:9200",
        state="postgresql://u@h/state",
        index=module.INDEX,
        days=module.DAYS,
    )
    assert set(load_text(text).checks) == {"reviews"}


def test_driftgauge_config_is_valid_and_its_secrets_are_set(compose: dict[str, Any]) -> None:
    service = compose["services"]["driftgauge"]
    config_path = _host_path(service, "/etc/driftgauge/config.yml")
    config = load_file(config_path)
    assert config.checks, "the compose config defines no check"
    refs = env_references(yaml.safe_load(config_path.read_text(encoding="utf-8")))
    assert refs, "the compose config takes no credential from the environment"
    missing = refs - set(service["environment"])
    assert not missing, f"driftgauge service does not set {missing}"
    assert service["read_only"] is True


def test_prometheus_config_loads_the_rules_and_scrapes_driftgauge(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    promtool = require_promtool()
    service = compose["services"]["prometheus"]
    config = yaml.safe_load(_host_path(service, "/etc/prometheus/prometheus.yml").read_text())
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "driftgauge"]
    # The ledger metrics name the sync job in `sync_job`: driftgauge's labels never
    # override the target's, so `job` stays driftgauge.
    assert job.get("honor_labels", False) is False
    assert job["static_configs"][0]["targets"] == ["driftgauge:8080"]
    # promtool resolves rule files on this machine: point them at the mounted repo files.
    config["rule_files"] = [str(_host_path(service, p)) for p in config["rule_files"]]
    assert any(p.endswith("driftgauge-rules.yml") for p in config["rule_files"])
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    result = run([promtool, "check", "config", str(local)], timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "SUCCESS" in output and "rules found" in output


def test_grafana_gets_provisioning_and_the_dashboard(compose: dict[str, Any]) -> None:
    service = compose["services"]["grafana"]
    provider_file = _host_path(service, "/etc/grafana/provisioning/dashboards/driftgauge.yml")
    [provider] = yaml.safe_load(provider_file.read_text())["providers"]
    dashboards = _host_path(service, provider["options"]["path"])
    assert json.loads((dashboards / "driftgauge-drift.json").read_text())["uid"] == (
        "driftgauge-drift"
    )
    assert _host_path(service, "/etc/grafana/provisioning/datasources/prometheus.yml").is_file()
    home = service["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert _host_path(service, home).is_file()


def _dockerfile_lines() -> list[tuple[str, str]]:
    """Return the Dockerfile as (INSTRUCTION, arguments), continuations joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        lines.append((instruction.upper(), args.strip()))
    return lines


def _dockerfile_global_args() -> dict[str, str]:
    """Return the ARGs declared before the first FROM, with their defaults."""
    declared: dict[str, str] = {}
    for instruction, args in _dockerfile_lines():
        if instruction == "FROM":
            break
        assert instruction == "ARG", f"only ARG may come before the first FROM, not {instruction}"
        name, _, default = args.partition("=")
        declared[name] = default
    return declared


def _dockerfile_stages() -> list[list[tuple[str, str]]]:
    """Return the Dockerfile's stages of (INSTRUCTION, arguments), global ARGs left out."""
    stages: list[list[tuple[str, str]]] = []
    for instruction, args in _dockerfile_lines():
        if instruction == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction, args))
    assert stages, "Dockerfile has no FROM"
    return stages


def test_dockerfile_base_image_is_one_build_arg_a_digest_can_pin() -> None:
    # One ARG names the base of every stage, so `--build-arg BASE_IMAGE=...@sha256:...`
    # pins them all at once; a stage on a literal tag would escape the pin.
    base = _dockerfile_global_args().get("BASE_IMAGE")
    assert base is not None, "no global ARG BASE_IMAGE before the first FROM"
    assert re.fullmatch(r"python:3\.11-slim-[a-z]+", base), base
    for stage in _dockerfile_stages():
        image = stage[0][1].split()[0]
        assert image == "${BASE_IMAGE}", f"stage {stage[0][1]!r} does not start from BASE_IMAGE"
    # The docs say how to pin it; a digest is never invented in the repo.
    assert "@sha256:" not in base
    assert "--build-arg BASE_IMAGE=" in (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")


def test_dockerfile_is_multi_stage_on_python_slim() -> None:
    stages = _dockerfile_stages()
    assert len(stages) >= 2
    final_from = stages[-1][0][1].replace("${BASE_IMAGE}", _dockerfile_global_args()["BASE_IMAGE"])
    assert final_from.startswith("python:3.11-slim")
    assert any(" AS build" in args for _, args in (s[0] for s in stages[:-1]))


def test_dockerfile_runs_as_non_root_with_a_healthcheck(monkeypatch: pytest.MonkeyPatch) -> None:
    final = _dockerfile_stages()[-1]
    instructions = [i for i, _ in final]
    users = [args for i, args in final if i == "USER"]
    assert users, "final stage has no USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    assert instructions.index("USER") < instructions.index("ENTRYPOINT")
    [health] = [args for i, args in final if i == "HEALTHCHECK"]
    assert "/healthz" in health and "python" in health
    assert "curl" not in health and "wget" not in health
    # The healthcheck asks the port serve listens on, not a hard-coded 8080: the variable
    # it reads is the one the final stage sets and the one `serve` takes its port from.
    assert "8080" not in health
    [port_var] = set(re.findall(r"environ\[['\"](\w+)['\"]\]", health)) or {None}
    assert port_var is not None, f"the healthcheck reads no port variable: {health}"
    env = " ".join(args for i, args in final if i == "ENV")
    assert f"{port_var}=8080" in env
    # CMD passes no --port, so serve's default decides: it must read the same variable.
    assert "--port" not in dict(final)["CMD"]
    monkeypatch.setenv(port_var, "9123")
    assert _parser().parse_args(json.loads(dict(final)["CMD"])).port == 9123, (
        f"serve does not take its port from {port_var}"
    )
    entry = json.loads(dict(final)["ENTRYPOINT"])
    cmd = json.loads(dict(final)["CMD"])
    assert entry == ["driftgauge"]
    assert cmd == ["serve", "--config", "/etc/driftgauge/config.yml"]
    assert dict(final)["EXPOSE"] == "8080"
    # The config comes from outside; the image must not bake one in.
    assert not any(i in ("COPY", "ADD") and "config.yml" in a for i, a in final)


def _stage(name: str) -> list[tuple[str, str]]:
    """Return the instructions of the stage `FROM ... AS name`."""
    [stage] = [s for s in _dockerfile_stages() if s[0][1].endswith(f" AS {name}")]
    return stage


def test_dockerfile_installs_the_locked_dependencies_before_the_code() -> None:
    deps = _stage("deps")
    # The dependency stage sees the lock and nothing else of the repo: a code change
    # cannot invalidate its cache, and pip cannot pick a version outside the lock.
    assert [a for i, a in deps if i in ("COPY", "ADD")] == ["requirements.lock ./"]
    [wheel] = [a for i, a in deps if i == "RUN" and "pip" in a]
    assert "--require-hashes" in wheel and "-r requirements.lock" in wheel
    [build] = [a for i, a in _stage("build") if i == "RUN" and "pip" in a]
    assert "--no-deps" in build, "the code's wheel must not resolve dependencies itself"
    final = _dockerfile_stages()[-1]
    installs = [a for i, a in final if i == "RUN" and "pip install" in a]
    assert len(installs) == 2, installs
    locked, code = installs
    assert "from=deps" in locked and "driftgauge" not in locked.split("pip install", 1)[1]
    assert "from=build" in code and "/wheels/driftgauge-" in code
    for run_args in installs:
        assert "--no-index" in run_args and "--no-deps" in run_args, run_args


def test_dockerfile_final_stage_has_no_source_or_build_tools() -> None:
    final = _dockerfile_stages()[-1]
    assert not [a for i, a in final if i in ("COPY", "ADD")], "the final stage copies files"
    text = " ".join(a for _, a in final)
    for tool in ("apt-get", "apk ", "gcc", "build-essential", "pip wheel", "setup.py"):
        assert tool not in text, tool


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "start from ignoring everything (.venv, .local are huge)"
    copied = {
        args.split()[0]
        for stage in _dockerfile_stages()
        for i, args in stage
        if i == "COPY" and not args.startswith("--")
    }
    for source in copied:
        assert f"!{source.rstrip('/')}" in {p.rstrip("/") for p in patterns}, source
