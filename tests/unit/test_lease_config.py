"""The `state.lease` config: defaults, durations, and problems named by location."""

from __future__ import annotations

from datetime import timedelta

import pytest

from .config_text import config_problems, loaded_state, state_config


def test_a_run_is_renewed_every_15s_and_expires_after_60s_by_default() -> None:
    lease = loaded_state("lease").lease
    assert (lease.heartbeat, lease.expires) == (timedelta(seconds=15), timedelta(seconds=60))


def test_the_lease_takes_durations() -> None:
    lease = loaded_state("lease", "{heartbeat: 1s, expires: 4s}").lease
    assert (lease.heartbeat, lease.expires) == (timedelta(seconds=1), timedelta(seconds=4))
    assert loaded_state("lease", "{expires: 2m}").lease.heartbeat == timedelta(seconds=15)


@pytest.mark.parametrize(
    ("lease", "problem"),
    [
        ("{heartbeat: often}", "state.lease.heartbeat: "),
        ("{expires: 0s}", "state.lease.expires: must be at least 2s"),
        ("{heartbeat: 31s}", "state.lease: expires (60s) must be at least twice heartbeat (31s)"),
        ("{heartbeat: 10s, expires: 15s}", "state.lease: expires (15s) must be at least twice"),
        ("{heartbeat: 1s, ttl: 1d}", "state.lease.ttl: unknown key"),
    ],
)
def test_a_bad_lease_names_its_location(lease: str, problem: str) -> None:
    problems = config_problems(state_config("lease", lease))
    assert any(p.startswith(problem) for p in problems), problems
