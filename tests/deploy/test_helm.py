"""The Helm chart: helm lint --strict, helm template, and offline Kubernetes schema validation.

Schemas come from the `kubernetes-validate` wheel (dev extra), which bundles the
Kubernetes OpenAPI-derived JSON schemas of every minor release since 1.25, so validation
needs no network. ServiceMonitor and PrometheusRule are CRDs with no schema there: they
are checked against the Service they scrape and with promtool.
"""

from __future__ import annotations

import importlib
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from deploy_support import (
    CHART,
    ROOT,
    RULES,
    env_references,
    promtool_check_rules,
    require_promtool,
    rules_generator,
    run,
)

from driftgauge.config import load_text

HELM_SH = ROOT / "deploy" / "local" / "helm.sh"
PROMTOOL_TESTS = Path(__file__).resolve().parent / "promtool"
RELEASE = "dg"
NAMESPACE = "observability"
# The chart's minimum (Chart.yaml kubeVersion) and the newest the wheel knows.
KUBE_VERSIONS = ("1.25", "latest")
# No public image exists, so every install names the user's own; `.invalid` never resolves.
IMAGE = ["--set", "image.repository=registry.invalid/team/driftgauge"]
MONITORING = [
    "--set", "serviceMonitor.enabled=true",
    "--set", "prometheusRule.enabled=true",
    "--set", "secret.existingSecret=driftgauge-credentials",
]
CREATED_SECRET = [
    "--set-string", "secret.values.DRIFTGAUGE_SOURCE_DSN=postgresql://u:p@tasks:5432/tasks",
    "--set-string", "secret.values.DRIFTGAUGE_STATE_DSN=postgresql://u:p@state:5432/dg",
    "--set-string", "secret.values.DRIFTGAUGE_OPENSEARCH_PASSWORD=s3cret",
    "--set-string", "secret.values.DRIFTGAUGE_API_TOKEN=t0ken",
]
VARIANTS = {
    "default": [],
    "monitoring+existingSecret": MONITORING,
    "created-secret": CREATED_SECRET,
}


@pytest.fixture(scope="session")
def helm() -> str:
    """Return the path of a Helm binary, installing it with deploy/local/helm.sh if needed."""
    try:
        # Idempotent: returns at once when the right version is already in .local/bin.
        result = run([str(HELM_SH), "install"], timeout=1200)
    except OSError as exc:
        pytest.skip(f"helm cannot be installed: {exc}")
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:])
        pytest.skip(f"helm cannot be installed by deploy/local/helm.sh:\n{tail}")
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def kubernetes_validate() -> ModuleType:
    """Return the kubernetes_validate module, which the dev extra installs."""
    try:
        return importlib.import_module("kubernetes_validate")
    except ImportError:
        pytest.fail("kubernetes-validate is missing: pip install -e '.[dev]'", pytrace=False)


def _template(helm: str, *args: str) -> list[dict[str, Any]]:
    result = run(
        [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *IMAGE, *args],
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = [d["kind"] for d in docs]
    assert len(kinds) == len(set(kinds)), f"duplicate kinds {kinds}"
    return {d["kind"]: d for d in docs}


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = _by_kind(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    return dict(container)


@pytest.mark.parametrize("variant", VARIANTS)
def test_helm_lint_strict(helm: str, variant: str) -> None:
    result = run([helm, "lint", "--strict", str(CHART), *VARIANTS[variant]], timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "0 chart(s) failed" in output
    assert "[WARNING]" not in output and "[ERROR]" not in output


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_objects_match_kubernetes_schemas(
    helm: str, variant: str, kubernetes_validate: ModuleType
) -> None:
    latest = kubernetes_validate.utils.latest_version()
    docs = _template(helm, *VARIANTS[variant])
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # CRDs: see test_service_monitor_* and test_prometheus_rule_*
        for version in KUBE_VERSIONS:
            target = latest if version == "latest" else version
            try:
                kubernetes_validate.validate(doc, target, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{doc['kind']} {path}: {exc.message} (Kubernetes {target})")
        checked += 1
    assert checked >= 4


def test_schema_validation_catches_a_broken_object(kubernetes_validate: ModuleType) -> None:
    bad = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"ports": [{"port": "eighty"}], "selectr": {}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.25", strict=True)


def test_default_render_has_no_optional_objects(helm: str) -> None:
    kinds = set(_by_kind(_template(helm)))
    assert kinds == {"ServiceAccount", "ConfigMap", "Service", "Deployment"}


def test_deployment_is_locked_down_and_probed(helm: str) -> None:
    docs = _template(helm)
    pod = _by_kind(docs)["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    container = _container(docs)
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["args"] == ["serve", "--config", "/etc/driftgauge/config.yml"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/driftgauge"] == "config"
    assert "/tmp" in mounts, "a read-only root filesystem still needs a writable /tmp"
    assert "envFrom" not in container, "no secret configured, none should be referenced"


def test_configmap_holds_a_valid_config(helm: str) -> None:
    config_map = _by_kind(_template(helm))["ConfigMap"]
    text = config_map["data"]["config.yml"]
    config = load_text(text, source="configmap config.yml")
    assert config.checks
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert yaml.safe_load(text) == values["config"]


def test_existing_secret_is_exposed_as_env(helm: str) -> None:
    docs = _template(helm, *MONITORING)
    assert "Secret" not in _by_kind(docs)
    assert _container(docs)["envFrom"] == [{"secretRef": {"name": "driftgauge-credentials"}}]


def test_created_secret_covers_every_env_reference(helm: str) -> None:
    docs = _template(helm, *CREATED_SECRET)
    objects = _by_kind(docs)
    secret = objects["Secret"]
    assert _container(docs)["envFrom"] == [{"secretRef": {"name": secret["metadata"]["name"]}}]
    refs = env_references(yaml.safe_load(objects["ConfigMap"]["data"]["config.yml"]))
    assert refs and refs <= set(secret["stringData"]), refs - set(secret["stringData"])
    # A changed credential rolls the pod.
    changed = _template(
        helm, *CREATED_SECRET, "--set-string", "secret.values.DRIFTGAUGE_API_TOKEN=new"
    )
    annotations = [
        _by_kind(d)["Deployment"]["spec"]["template"]["metadata"]["annotations"]
        for d in (docs, changed)
    ]
    assert annotations[0]["checksum/secret"] != annotations[1]["checksum/secret"]
    assert annotations[0]["checksum/config"] == annotations[1]["checksum/config"]


def test_service_monitor_scrapes_the_service_as_job_driftgauge(helm: str) -> None:
    objects = _by_kind(_template(helm, *MONITORING))
    monitor, service = objects["ServiceMonitor"], objects["Service"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    # The absence alerts look for up{job="driftgauge"}.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "driftgauge"
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert endpoint.get("honorLabels", False) is False
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]


def test_service_monitor_sends_a_scrape_token_when_metrics_are_private(helm: str) -> None:
    assert "authorization" not in _by_kind(_template(helm, *MONITORING))["ServiceMonitor"][
        "spec"]["endpoints"][0]
    private = _template(
        helm, *MONITORING, "--set", "config.api.public_read=false",
        "--set", "config.api.metrics_tokens[0]=env:DRIFTGAUGE_METRICS_TOKEN",
        "--set", "serviceMonitor.bearerTokenSecret.name=driftgauge-credentials",
        "--set", "serviceMonitor.bearerTokenSecret.key=DRIFTGAUGE_METRICS_TOKEN")
    [endpoint] = _by_kind(private)["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "driftgauge-credentials", "key": "DRIFTGAUGE_METRICS_TOKEN"}}
    # The rendered config takes the scrape token, so the ServiceMonitor's token opens /metrics.
    config = next(d for d in private if d["kind"] == "ConfigMap")
    text = next(iter(config["data"].values()))
    api = load_text(text, resolve_secrets=False).api
    assert api.public_read is False and len(api.metrics_tokens) == 1


def _generated(values: dict[str, Any]) -> dict[str, Any]:
    """Return what deploy/prometheus/generate.py renders with chart-style values."""
    gen = rules_generator()
    source = gen.load_source()
    rendered: dict[str, Any] = gen.render(
        gen.chart_template(source), gen.options_from_values(values, source))
    return rendered


def test_prometheus_rule_is_the_generated_rules_for_this_release(
    helm: str, tmp_path: Path
) -> None:
    rule = _by_kind(_template(helm, *MONITORING))["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    # By default the rules select this release's job (the chart name) and namespace.
    expected = _generated({"selectors": ['job="driftgauge"', f'namespace="{NAMESPACE}"']})
    assert rule["spec"] == expected
    # What the operator would load passes promtool, like the plain file.
    extracted = tmp_path / "from-chart.yml"
    extracted.write_text(yaml.safe_dump(rule["spec"]))
    result = promtool_check_rules(require_promtool(), extracted)
    assert result.returncode == 0, result.stdout + result.stderr
    plain = yaml.safe_load(RULES.read_text())
    assert [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]] == [
        r["alert"] for g in plain["groups"] for r in g["rules"]]


def test_prometheus_rule_values_match_the_generator_given_the_same(
    helm: str, tmp_path: Path
) -> None:
    values = {"prometheusRule": {
        "enabled": True,
        "selectors": ['job="dg"', 'cluster=~"eu-.*"'],
        "runbookBaseUrl": "https://wiki.example/ops/driftgauge",
        "additionalLabels": {"team": "data"},
        "rules": {
            "DriftgaugeVolumeAnomaly": {"enabled": False},
            "DriftgaugeCheckStale": {"for": "1h", "labels": {"severity": "warning"}},
            "DriftgaugeCheckDown": {"enabled": True},
        },
    }}
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    rule = _by_kind(_template(helm, "-f", str(path)))["PrometheusRule"]
    assert rule["spec"] == _generated(values)
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert "DriftgaugeVolumeAnomaly" not in alerts
    assert alerts["DriftgaugeCheckStale"]["for"] == "1h"
    assert alerts["DriftgaugeCheckStale"]["labels"] == {"severity": "warning", "team": "data"}
    assert alerts["DriftgaugeAbsent"]["expr"] == 'absent(up{job="dg", cluster=~"eu-.*"})'
    assert all(a["annotations"]["runbook_url"].startswith("https://wiki.example/ops/driftgauge#")
               for a in alerts.values())


def test_renamed_release_keeps_driftgauge_absent_working(helm: str, tmp_path: Path) -> None:
    docs = _template(helm, *MONITORING, "--set", "nameOverride=recon",
                     "--set", "prometheusRule.runbookBaseUrl=https://runbooks.example/driftgauge.md")
    objects = _by_kind(docs)
    # The ServiceMonitor makes the job the chart name, which nameOverride renamed...
    monitor, service = objects["ServiceMonitor"], objects["Service"]
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "recon"
    # ...and the rules follow it.
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(objects["PrometheusRule"]["spec"]))
    test_file = tmp_path / "renamed_release_test.yml"
    test_file.write_text((PROMTOOL_TESTS / "renamed_release_test.yml").read_text())
    result = run([require_promtool(), "test", "rules", str(test_file)], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_prometheus_rule_refuses_unknown_alerts_and_bad_overrides(helm: str) -> None:
    for args, expected in (
        (["--set", "prometheusRule.rules.DriftgaugeNope.enabled=false"],
         "prometheusRule.rules.DriftgaugeNope: no such alert"),
        (["--set", "prometheusRule.rules.DriftgaugeCheckDown.for=soon"],
         "prometheusRule.rules.DriftgaugeCheckDown.for"),
        (["--set", "prometheusRule.rules.DriftgaugeCheckDown.enable=false"], "enable"),
        (["--set-string", "prometheusRule.selectors[0]=job=recon"], "prometheusRule.selectors.0"),
        (["--set", "prometheusRule.runbookBaseUrl=docs/runbooks.md"],
         "prometheusRule.runbookBaseUrl"),
    ):
        result = run([helm, "template", RELEASE, str(CHART), *IMAGE, *MONITORING, *args],
                     timeout=120)
        assert result.returncode != 0, args
        assert expected in result.stderr, result.stderr


def test_values_schema_rejects_unknown_and_invalid_values(helm: str) -> None:
    for args, expected in (
        (["--set", "serviceMonitor.enabeld=true"], "enabeld"),
        (["--set", "service.port=0"], "service.port"),
        (["--set", "image.pullPolicy=Sometimes"], "image.pullPolicy"),
    ):
        result = run([helm, "template", RELEASE, str(CHART), *IMAGE, *args], timeout=120)
        assert result.returncode != 0, args
        assert expected in result.stderr, result.stderr


def test_image_repository_is_required_and_tagged_with_the_app_version(helm: str) -> None:
    result = run([helm, "template", RELEASE, str(CHART)], timeout=120)
    assert result.returncode != 0
    assert "image.repository is required" in result.stderr, result.stderr
    assert "docs/deploy.md" in result.stderr
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    image = _container(_template(helm))["image"]
    assert image == f"registry.invalid/team/driftgauge:{chart['appVersion']}"


def test_chart_packages_into_dist_and_the_package_lints(helm: str) -> None:
    dist = ROOT / "dist"
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    package = dist / f"driftgauge-{chart['version']}.tgz"
    package.unlink(missing_ok=True)
    result = run([helm, "package", str(CHART), "--destination", str(dist)], timeout=120)
    assert result.returncode == 0, result.stderr
    assert package.is_file(), result.stdout
    with tarfile.open(package) as tgz:
        names = set(tgz.getnames())
    assert {"driftgauge/Chart.yaml", "driftgauge/values.schema.json",
            "driftgauge/files/driftgauge-rules.yml",
            "driftgauge/templates/deployment.yaml"} <= names
    lint = run([helm, "lint", "--strict", str(package), *IMAGE], timeout=120)
    output = lint.stdout + lint.stderr
    assert lint.returncode == 0 and "0 chart(s) failed" in output, output
    assert "[WARNING]" not in output and "[ERROR]" not in output
    rendered = run([helm, "template", RELEASE, str(package), *IMAGE], timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: Deployment" in rendered.stdout
