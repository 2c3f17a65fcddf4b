"""What a sync job pays to embed the ledger or repair client: no server stack, little time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "service"
# The service's stack: a sync job that embeds the client must not load any of it.
SERVER_STACK = (
    "fastapi",
    "starlette",
    "uvicorn",
    "asyncpg",
    "apscheduler",
    "opensearchpy",
    "prometheus_client",
)
_PROBE = """
import json, sys, time
start = time.perf_counter()
import {module}
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "modules": sorted(sys.modules)}}))
"""


def _import(module: str) -> tuple[float, list[str]]:
    """Return the seconds a fresh interpreter takes to import `module`, and what it loaded."""
    env = {**os.environ, "PYTHONPATH": str(SERVICE)}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    probe = json.loads(out.stdout)
    return float(probe["seconds"]), list(probe["modules"])


def test_the_ledger_client_loads_no_server_stack_and_little_of_driftgauge() -> None:
    _, modules = _import("driftgauge.ledger.client")
    loaded = {m.split(".")[0] for m in modules}
    assert [p for p in SERVER_STACK if p in loaded] == []
    ours = sorted(m for m in modules if m.startswith("driftgauge."))
    allowed = (
        "driftgauge.core",
        "driftgauge.ledger.client",
        "driftgauge.ledger.models",
        "driftgauge.ledger.rules",
    )
    assert [m for m in ours if not m.startswith(allowed) and m != "driftgauge.ledger"] == []


def test_the_repair_client_loads_no_server_stack_and_no_other_feature() -> None:
    _, modules = _import("driftgauge.repair.client")
    loaded = {m.split(".")[0] for m in modules}
    assert [p for p in SERVER_STACK if p in loaded] == []
    ours = sorted(m for m in modules if m.startswith("driftgauge."))
    allowed = ("driftgauge.core", "driftgauge.repair.client")
    assert [m for m in ours if not m.startswith(allowed) and m != "driftgauge.repair"] == []


def test_the_ledger_client_imports_in_under_two_thirds_the_time_of_the_service() -> None:
    # Relative and the best of three interleaved runs, so a busy machine slows both sides
    # alike; the figures are printed for -s.
    pairs = [
        (_import("driftgauge.ledger.client")[0], _import("driftgauge.app.service")[0])
        for _ in range(3)
    ]
    client, service = min(c for c, _ in pairs), min(s for _, s in pairs)
    print(
        f"import driftgauge.ledger.client: {client:.3f} s; driftgauge.app.service: {service:.3f} s"
    )
    assert client < service * 2 / 3
