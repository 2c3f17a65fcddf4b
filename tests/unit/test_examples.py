"""Every example config under deploy/examples validates as `driftgauge config validate` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftgauge.cli import main
from driftgauge.startup import load_service_config

FOLDER = Path(__file__).parents[2] / "deploy" / "examples"
EXAMPLES = sorted(FOLDER.glob("*.yml"))


def test_the_examples_are_found() -> None:
    assert {"trino.yml", "spark.yml", "trino_to_spark.yml"} <= {p.name for p in EXAMPLES}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_an_example_validates(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Secrets are env:/file: references to a deployment's values, not the example's.
    assert main(["config", "validate", "--no-secrets", str(example)]) == 0
    assert f"{example}: ok (" in capsys.readouterr().out


def test_the_trino_to_spark_example_reads_trino_into_spark() -> None:
    config = load_service_config(str(FOLDER / "trino_to_spark.yml"), resolve_secrets=False)
    check = config.checks["orders_copy"]
    assert (check.source.store.kind, check.reader.store.kind) == ("trino", "spark")
    assert str(check.timezone) == "Europe/Berlin"
