"""The Helm chart: helm lint --strict, helm template, and offline Kubernetes schema validation.

Schemas come from the `kubernetes-validate` wheel (dev extra), which bundles the
Kubernetes OpenAPI-derived JSON schemas of every minor release since 1.25, so validation
needs no network. ServiceMonitor and PrometheusRule are CRDs with no schema there: they
are checked against the Service they scrape and with promtool.
"""

from __future__ import annotations

import http.server
import importlib
import json
import re
import sys
import tarfile
import threading
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

from driftgauge.configfile.loader import load_text

HELM_SH = ROOT / "deploy" / "local" / "helm.sh"
PROMTOOL_TESTS = Path(__file__).resolve().parent / "promtool"
RELEASE = "dg"
NAMESPACE = "observability"
# The chart's minimum (Chart.yaml kubeVersion) and the newest the wheel knows.
KUBE_VERSIONS = ("1.25", "latest")
# No public image exists, so every install names the user's own; `.invalid` never resolves.
IMAGE = ["--set", "image.repository=registry.invalid/team/driftgauge"]
MONITORING = [
    "--set",
    "serviceMonitor.enabled=true",
    "--set",
    "prometheusRule.enabled=true",
    "--set",
    "secret.existingSecret=driftgauge-credentials",
]
CREATED_SECRET = [
    "--set-string",
    "secret.values.DRIFTGAUGE_SOURCE_DSN=postgresql://u:p@tasks:5432/tasks",
    "--set-string",
    "secret.values.DRIFTGAUGE_STATE_DSN=postgresql://u:p@state:5432/dg",
    "--set-string",
    "secret.values.DRIFTGAUGE_OPENSEARCH_PASSWORD=s3cret",
    "--set-string",
    "secret.values.DRIFTGAUGE_API_TOKEN=t0ken",
]
DIGEST = "sha256:" + "0123456789abcdef" * 4
# Every optional piece on at once (values as JSON, as a user's values file would hold them).
FULL = [
    *MONITORING,
    "--set",
    "ingress.enabled=true",
    "--set",
    "ingress.className=nginx",
    "--set-json",
    'ingress.tls=[{"secretName": "dg-tls", "hosts": ["driftgauge.example.internal"]}]',
    "--set",
    "networkPolicy.enabled=true",
    "--set-json",
    'networkPolicy.ingressFrom=[{"namespaceSelector": {"matchLabels": '
    '{"kubernetes.io/metadata.name": "monitoring"}}}]',
    "--set-json",
    'networkPolicy.egress=[{"ports": [{"port": 5432, "protocol": "TCP"}]}]',
    "--set",
    "grafanaDashboard.enabled=true",
    "--set-json",
    'extraVolumes=[{"name": "reader", "secret": {"secretName": "reader-secret"}}]',
    "--set-json",
    'extraVolumeMounts=[{"name": "reader", "mountPath": "/etc/driftgauge/secrets",'
    ' "readOnly": true}]',
    "--set-json",
    'envFrom=[{"configMapRef": {"name": "driftgauge-env"}}]',
    "--set",
    f"image.digest={DIGEST}",
    "--set-json",
    'serviceMonitor.relabelings=[{"targetLabel": "cluster", "replacement": "eu-1"}]',
    "--set-json",
    'serviceMonitor.metricRelabelings=[{"action": "drop", '
    '"sourceLabels": ["__name__"], "regex": "python_gc_.*"}]',
]
VARIANTS = {
    "default": [],
    "monitoring+existingSecret": MONITORING,
    "created-secret": CREATED_SECRET,
    "everything-on": FULL,
}
# Keys of values.yaml the chart README documents as a whole object rather than key by key.
OPAQUE_VALUES = {
    "config",
    "resources",
    "podSecurityContext",
    "securityContext",
    "livenessProbe",
    "readinessProbe",
    "grafanaDashboard.labels",
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


def _template(helm: str, *args: str, tests: bool = False) -> list[dict[str, Any]]:
    # The `helm test` pod is a hook that only `helm test` creates: left out unless asked for.
    skip = [] if tests else ["--skip-tests"]
    result = run(
        [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *IMAGE, *skip, *args],
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
    docs = _template(helm, *VARIANTS[variant], tests=True)
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
    assert (
        "authorization"
        not in _by_kind(_template(helm, *MONITORING))["ServiceMonitor"]["spec"]["endpoints"][0]
    )
    private = _template(
        helm,
        *MONITORING,
        "--set",
        "config.api.public_read=false",
        "--set",
        "config.api.metrics_tokens[0]=env:DRIFTGAUGE_METRICS_TOKEN",
        "--set",
        "serviceMonitor.bearerTokenSecret.name=driftgauge-credentials",
        "--set",
        "serviceMonitor.bearerTokenSecret.key=DRIFTGAUGE_METRICS_TOKEN",
    )
    [endpoint] = _by_kind(private)["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "driftgauge-credentials", "key": "DRIFTGAUGE_METRICS_TOKEN"},
    }
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
        gen.chart_template(source), gen.options_from_values(values, source)
    )
    return rendered


def test_prometheus_rule_is_the_generated_rules_for_this_release(helm: str, tmp_path: Path) -> None:
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
        r["alert"] for g in plain["groups"] for r in g["rules"]
    ]


def test_prometheus_rule_values_match_the_generator_given_the_same(
    helm: str, tmp_path: Path
) -> None:
    values = {
        "prometheusRule": {
            "enabled": True,
            "selectors": ['job="dg"', 'cluster=~"eu-.*"'],
            "runbookBaseUrl": "https://wiki.example/ops/driftgauge",
            "additionalLabels": {"team": "data"},
            "rules": {
                "DriftgaugeVolumeAnomaly": {"enabled": False},
                "DriftgaugeCheckStale": {"for": "1h", "labels": {"severity": "warning"}},
                "DriftgaugeCheckDown": {"enabled": True},
            },
        }
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    rule = _by_kind(_template(helm, "-f", str(path)))["PrometheusRule"]
    assert rule["spec"] == _generated(values)
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert "DriftgaugeVolumeAnomaly" not in alerts
    assert alerts["DriftgaugeCheckStale"]["for"] == "1h"
    assert alerts["DriftgaugeCheckStale"]["labels"] == {"severity": "warning", "team": "data"}
    assert alerts["DriftgaugeAbsent"]["expr"] == 'absent(up{job="dg", cluster=~"eu-.*"})'
    assert all(
        a["annotations"]["runbook_url"].startswith("https://wiki.example/ops/driftgauge#")
        for a in alerts.values()
    )


def test_renamed_release_keeps_driftgauge_absent_working(helm: str, tmp_path: Path) -> None:
    docs = _template(
        helm,
        *MONITORING,
        "--set",
        "nameOverride=recon",
        "--set",
        "prometheusRule.runbookBaseUrl=https://runbooks.example/driftgauge.md",
    )
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
        (
            ["--set", "prometheusRule.rules.DriftgaugeNope.enabled=false"],
            "prometheusRule.rules.DriftgaugeNope: no such alert",
        ),
        (
            ["--set", "prometheusRule.rules.DriftgaugeCheckDown.for=soon"],
            "prometheusRule.rules.DriftgaugeCheckDown.for",
        ),
        (["--set", "prometheusRule.rules.DriftgaugeCheckDown.enable=false"], "enable"),
        (["--set-string", "prometheusRule.selectors[0]=job=recon"], "prometheusRule.selectors.0"),
        (
            ["--set", "prometheusRule.runbookBaseUrl=docs/runbooks.md"],
            "prometheusRule.runbookBaseUrl",
        ),
    ):
        result = run(
            [helm, "template", RELEASE, str(CHART), *IMAGE, *MONITORING, *args], timeout=120
        )
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
    assert {
        "driftgauge/Chart.yaml",
        "driftgauge/values.schema.json",
        "driftgauge/files/driftgauge-rules.yml",
        "driftgauge/templates/deployment.yaml",
    } <= names
    lint = run([helm, "lint", "--strict", str(package), *IMAGE], timeout=120)
    output = lint.stdout + lint.stderr
    assert lint.returncode == 0 and "0 chart(s) failed" in output, output
    assert "[WARNING]" not in output and "[ERROR]" not in output
    rendered = run([helm, "template", RELEASE, str(package), *IMAGE], timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: Deployment" in rendered.stdout


def _named(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _release_objects(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Return the objects by kind, leaving out the dashboard ConfigMap and the test Pod."""
    return _by_kind(
        [d for d in docs if d["kind"] != "Pod" and not d["metadata"]["name"].endswith("-dashboard")]
    )


def test_everything_on_renders_each_optional_object(helm: str) -> None:
    docs = _template(helm, *FULL, tests=True)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ConfigMap",
            "ConfigMap",
            "Service",
            "Deployment",
            "Ingress",
            "NetworkPolicy",
            "ServiceMonitor",
            "PrometheusRule",
            "Pod",
        ]
    )


def test_ingress_routes_every_host_to_the_service_port(helm: str) -> None:
    objects = _release_objects(_template(helm, *FULL))
    ingress, service = objects["Ingress"], objects["Service"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [
        {"secretName": "dg-tls", "hosts": ["driftgauge.example.internal"]}
    ]
    [rule] = ingress["spec"]["rules"]
    assert rule["host"] == "driftgauge.example.internal"
    [path] = rule["http"]["paths"]
    assert path["path"] == "/" and path["pathType"] == "Prefix"
    backend = path["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    assert "Ingress" not in _by_kind(_template(helm))
    no_hosts = run(
        [
            helm,
            "template",
            RELEASE,
            str(CHART),
            *IMAGE,
            "--set",
            "ingress.enabled=true",
            "--set-json",
            "ingress.hosts=[]",
        ],
        timeout=120,
    )
    assert no_hosts.returncode != 0 and "ingress.hosts needs at least one host" in no_hosts.stderr


def test_network_policy_opens_port_http_to_the_listed_peers_and_the_test_pod(helm: str) -> None:
    docs = _template(helm, *FULL, tests=True)
    objects = {d["kind"]: d for d in docs}
    policy, deployment, test_pod = objects["NetworkPolicy"], objects["Deployment"], objects["Pod"]
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    [rule] = spec["ingress"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert "http" in {p["name"] for p in container["ports"]}
    peers = rule["from"]
    assert peers[0] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    }
    # `helm test` still reaches the Service.
    assert peers[1]["podSelector"]["matchLabels"].items() <= test_pod["metadata"]["labels"].items()
    assert spec["egress"] == [{"ports": [{"port": 5432, "protocol": "TCP"}]}]
    # Without peers or egress rules: any source on port http, egress unrestricted.
    open_policy = _by_kind(_template(helm, "--set", "networkPolicy.enabled=true"))["NetworkPolicy"][
        "spec"
    ]
    assert open_policy["policyTypes"] == ["Ingress"]
    assert open_policy["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]
    assert "egress" not in open_policy


def test_extra_volumes_mount_a_secret_for_file_references(helm: str) -> None:
    docs = _template(
        helm,
        *FULL,
        "--set",
        "config.stores.search.password=file:/etc/driftgauge/secrets/opensearch-password",
    )
    pod = _release_objects(docs)["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["reader"] == {"name": "reader", "secret": {"secretName": "reader-secret"}}
    assert {"config", "tmp"} <= set(volumes)
    [container] = pod["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/driftgauge/secrets"] == {
        "name": "reader",
        "mountPath": "/etc/driftgauge/secrets",
        "readOnly": True,
    }
    # The config's file: reference lies under that mount.
    config_map = _named(docs, "ConfigMap")[f"{RELEASE}-driftgauge"]
    text = config_map["data"]["config.yml"]
    assert load_text(text, resolve_secrets=False).checks  # still a valid config
    password = yaml.safe_load(text)["stores"]["search"]["password"]
    assert password.startswith("file:/etc/driftgauge/secrets/")
    # A volume may not take the name of one the chart mounts itself.
    clash = run(
        [
            helm,
            "template",
            RELEASE,
            str(CHART),
            *IMAGE,
            "--set-json",
            'extraVolumes=[{"name": "config", "emptyDir": {}}]',
        ],
        timeout=120,
    )
    assert clash.returncode != 0 and "extraVolumes" in clash.stderr


def test_env_from_adds_sources_after_the_chart_secret(helm: str) -> None:
    container = _container(list(_release_objects(_template(helm, *FULL)).values()))
    assert container["envFrom"] == [
        {"secretRef": {"name": "driftgauge-credentials"}},
        {"configMapRef": {"name": "driftgauge-env"}},
    ]
    alone = _container(_template(helm, "--set-json", 'envFrom=[{"secretRef": {"name": "x"}}]'))
    assert alone["envFrom"] == [{"secretRef": {"name": "x"}}]


def test_image_digest_pins_the_image(helm: str) -> None:
    image = _container(
        _template(helm, "--set", f"image.digest={DIGEST}", "--set", "image.tag=ignored")
    )["image"]
    assert image == f"registry.invalid/team/driftgauge@{DIGEST}"
    bad = run(
        [helm, "template", RELEASE, str(CHART), *IMAGE, "--set", "image.digest=latest"], timeout=120
    )
    assert bad.returncode != 0 and "image.digest" in bad.stderr


def test_service_monitor_carries_relabelings(helm: str) -> None:
    [endpoint] = _release_objects(_template(helm, *FULL))["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["relabelings"] == [{"targetLabel": "cluster", "replacement": "eu-1"}]
    assert endpoint["metricRelabelings"] == [
        {"action": "drop", "sourceLabels": ["__name__"], "regex": "python_gc_.*"}
    ]
    [plain] = _by_kind(_template(helm, *MONITORING))["ServiceMonitor"]["spec"]["endpoints"]
    assert "relabelings" not in plain and "metricRelabelings" not in plain


def test_existing_config_map_replaces_the_chart_one(helm: str) -> None:
    docs = _template(helm, "--set", "existingConfigMap=my-driftgauge-config")
    assert "ConfigMap" not in {d["kind"] for d in docs}
    pod = _by_kind(docs)["Deployment"]["spec"]["template"]["spec"]
    [config] = [v for v in pod["volumes"] if v["name"] == "config"]
    assert config["configMap"] == {
        "name": "my-driftgauge-config",
        "items": [{"key": "config.yml", "path": "config.yml"}],
    }
    default = _by_kind(_template(helm))
    [own] = [
        v
        for v in default["Deployment"]["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "config"
    ]
    assert own["configMap"]["name"] == default["ConfigMap"]["metadata"]["name"]


def test_grafana_dashboard_config_map_for_the_sidecar(helm: str) -> None:
    docs = _template(helm, *FULL)
    dashboard = _named(docs, "ConfigMap")[f"{RELEASE}-driftgauge-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["namespace"] == NAMESPACE
    [(name, text)] = dashboard["data"].items()
    assert name.endswith(".json")
    board = json.loads(text)
    assert board == json.loads((ROOT / "grafana" / "dashboards" / name).read_text())
    custom = _named(
        _template(
            helm,
            "--set",
            "grafanaDashboard.enabled=true",
            "--set",
            "grafanaDashboard.namespace=grafana",
            # Values merge into the default map: null removes its grafana_dashboard key.
            "--set-json",
            'grafanaDashboard.labels={"grafana_dashboard": null, "dashboards": "x"}',
            "--set-json",
            'grafanaDashboard.annotations={"grafana_folder": "Data"}',
        ),
        "ConfigMap",
    )[f"{RELEASE}-driftgauge-dashboard"]["metadata"]
    assert custom["namespace"] == "grafana"
    assert custom["labels"]["dashboards"] == "x" and "grafana_dashboard" not in custom["labels"]
    assert custom["annotations"] == {"grafana_folder": "Data"}


def test_helm_test_pod_asks_the_service_for_readyz(helm: str, tmp_path: Path) -> None:
    docs = _template(helm, tests=True)
    [pod] = [d for d in docs if d["kind"] == "Pod"]
    service = _release_objects(docs)["Service"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never"
    [container] = pod["spec"]["containers"]
    assert container["image"] == _container(list(_release_objects(docs).values()))["image"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    command = container["command"]
    url = f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/readyz"
    assert command[:2] == ["python", "-c"] and url in command[2]
    # Run the pod's script against a local server: 200 passes, 503 (not ready) fails.
    status = {"code": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = status["code"] if self.path == "/readyz" else 404
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b'{"status": "ready"}')

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        script = command[2].replace(url, f"http://127.0.0.1:{server.server_port}/readyz")
        python = sys.executable
        ok = run([python, "-c", script], timeout=60)
        assert ok.returncode == 0, ok.stderr
        status["code"] = 503
        not_ready = run([python, "-c", script], timeout=60)
        assert not_ready.returncode != 0
    finally:
        server.shutdown()
        server.server_close()
    off = _template(helm, "--set", "helmTest.enabled=false", tests=True)
    assert "Pod" not in {d["kind"] for d in off}


def _value_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for key, value in values.items():
        path = prefix + key
        if isinstance(value, dict) and value and path not in OPAQUE_VALUES:
            keys |= _value_keys(value, path + ".")
        else:
            keys.add(path)
    return keys


def test_chart_readme_documents_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = set(
        re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", (CHART / "README.md").read_text(), re.MULTILINE)
    )
    keys = _value_keys(values)
    assert keys - rows == set(), f"values missing from helm/driftgauge/README.md: {keys - rows}"
    assert rows - keys == set(), f"README rows for no value: {rows - keys}"
    # The schema knows every top-level value too (additionalProperties: false).
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(values) == set(schema["properties"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "ingress.hosts[0].paths[0].path=api"], "ingress.hosts.0.paths.0.path"),
        (["--set", "ingress.hosts[0].paths[0].pathType=Regex"], "pathType"),
        (
            ["--set-json", 'grafanaDashboard.labels={"grafana_dashboard": 1}'],
            "grafanaDashboard.labels.grafana_dashboard",
        ),
        (["--set", "networkPolicy.ingresFrom[0].x=y"], "ingresFrom"),
        (["--set-json", 'extraVolumeMounts=[{"name": "x"}]'], "mountPath"),
        (["--set-json", 'envFrom=[{"secretRefs": {"name": "x"}}]'], "secretRefs"),
        (["--set", "helmTest.enabled=yes"], "helmTest.enabled"),
        (["--set-json", 'serviceMonitor.relabelings=[{"target_label": "x"}]'], "target_label"),
    ],
)
def test_values_schema_rejects_bad_new_values(helm: str, args: list[str], expected: str) -> None:
    result = run([helm, "template", RELEASE, str(CHART), *IMAGE, *args], timeout=120)
    assert result.returncode != 0, args
    assert expected in result.stderr, result.stderr


def test_deployment_comment_matches_the_replica_claims() -> None:
    # Scheduled runs are claimed once across replicas (tests/e2e/test_runs_replicas.py), so
    # the template must not tell operators that a second replica runs every check twice.
    text = (CHART / "templates" / "deployment.yaml").read_text(encoding="utf-8")
    comments = " ".join(line.split("#", 1)[1] for line in text.splitlines() if "#" in line)
    assert "twice" not in comments.replace("not run a check twice", "")
    assert "claim" in comments
