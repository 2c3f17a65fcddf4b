"""`driftgauge probe rerun --json` and the other repair commands print ISO 8601 times."""

import json
from datetime import UTC, date, datetime

import pytest

from driftgauge.cli.repair import _print


def test_json_times_are_iso_8601_with_t(capsys: pytest.CaptureFixture[str]) -> None:
    start = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
    _print({"start": start, "day": date(2026, 11, 20), "n": 3}, True, lambda v: [])
    out = json.loads(capsys.readouterr().out)
    assert out == {"start": "2026-11-20T13:00:00+00:00", "day": "2026-11-20", "n": 3}
    assert datetime.fromisoformat(out["start"]) == start
