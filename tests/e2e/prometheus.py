"""A real Prometheus for the end-to-end tests that scrape `driftgauge serve`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

PROMETHEUS = Path("/usr/bin/prometheus")
needs_prometheus = pytest.mark.skipif(
    not PROMETHEUS.exists(), reason=f"{PROMETHEUS} is absent (`make tools` installs it)"
)


def write_scrape_config(tmp: Path, job: dict[str, Any]) -> Path:
    """Write `tmp`/prometheus.yml: one scrape job, scrapes and rules every second."""
    config = tmp / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {
                    "scrape_interval": "1s",
                    "scrape_timeout": "1s",
                    "evaluation_interval": "1s",
                },
                "scrape_configs": [job],
            }
        ),
        encoding="utf-8",
    )
    return config


def start_prometheus(tmp: Path, config: Path, port: int) -> subprocess.Popen[bytes]:
    """Start Prometheus on `port` with `config`, into a scratch TSDB and log under `tmp`."""
    with (tmp / "prometheus.log").open("wb") as out:
        return subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
