"""Fixtures every end-to-end module shares."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

import pytest

from tests.e2e.support import midnight_wait


@pytest.fixture(scope="module", autouse=True)
def clear_of_midnight() -> None:
    """Start each module well clear of 00:00 UTC, before its fixtures plant "yesterday"."""
    # Modules plant rows on yesterday's date and expect yesterday's bucket to be settled and
    # its ledger window due. Neither holds in the minute after midnight, and a module that
    # straddles midnight finds "yesterday" moved under it; a CI run just after 00:00 failed so.
    wait = midnight_wait(datetime.now(UTC))
    if wait > 0:
        print(f"\n[e2e] waiting {wait:.0f} s to start clear of midnight UTC", file=sys.stderr)
        time.sleep(wait)
