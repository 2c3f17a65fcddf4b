"""Every test run: refuse stores that this checkout neither started nor was told to use."""

from __future__ import annotations

import os

import pytest
from tools.local_stores import unowned


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop before any test when a derived store address reaches another checkout's store."""
    if os.environ.get("DRIFTGAUGE_SKIP_STORE_OWNERSHIP") == "1":
        return
    problems = unowned()
    if problems:
        pytest.exit("\n".join(problems), returncode=4)
