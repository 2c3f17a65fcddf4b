"""driftgauge configs for the bench: the full check, the seed's ablations and the seed's check.

Every variant is the full check with one design choice changed *in its config*, so the
same shipped engine judges it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from driftgauge.config.frozen import Config
from driftgauge.configfile.loader import load_text
from faults.syncjob import JOB
from faults.world import OS_URL, TIERS, Stores

MAIN = "reviews"
SEED_CHECK = "seed-5pct"
"""The seed's own reconciliation: joinable rows expected, 5% missing tolerated, no reasons."""
UNLIMITED = 1_000_000_000
CANARY_MARKER = "driftgauge_canary"
HIDE_CANARY = {"exists": {"field": CANARY_MARKER}}


@dataclass(frozen=True)
class Variant:
    """One weakened reconciliation: its check name, the seed's wording and its blind spot."""

    name: str
    title: str
    seed_blind_to: str
    """The fault the seed found this variant blind to ('' for: alarms on a healthy day)."""


VARIANTS = (
    Variant(
        "raw-index",
        "counts the raw index instead of the reader's filtered view",
        "vocabulary_drift",
    ),
    Variant("missing-only", "checks only for missing rows, not extra ones", "source_ttl"),
    Variant("distinct-only", "compares distinct-id counts with no content check", "retry_append"),
    Variant("last-7-days", "reconciles only the last 7 day buckets", "source_ttl"),
    Variant(
        "resolvable-keys",
        "takes \u201cexpected\u201d from keys the index can resolve",
        "key_rename",
    ),
    Variant("exact-all-rows", "expected = every source row, exact equality", ""),
)


def _main_check(stores: Stores) -> dict[str, Any]:
    return {
        "description": "Completed reviews must be visible on the reviewed-conversations dashboard.",
        "source": {
            "store": "tasks_db",
            "key": "task_id",
            "time": "completed_at",
            "query": "SELECT task_id, label, conversation_id, completed_at FROM tasks"
            " WHERE status = 'completed'",
        },
        "reader": {
            "store": "search",
            "index": stores.index,
            "key": "task_id",
            "time": "completed_at",
            "fields": {"label": "review_tier"},
            "filter": {
                "bool": {
                    "filter": [{"terms": {"review_tier": list(TIERS)}}],
                    "must_not": [HIDE_CANARY],
                }
            },
        },
        "fields": {"label": "string"},
        "timezone": "UTC",
        "exclusions": [{"reason": "no_join_key", "where": "conversation_id IS NULL"}],
        # The sync runs at 01:00; its window is reconciled 15 min after it reports.
        "settle": "1h",
        "tolerance": {
            "missing_ratio": 0.0,
            "extra": 0,
            "mismatched": 0,
            "exclusion_rate": {"no_join_key": 0.5, "no_document": 0.05},
        },
        "schedule": {
            "recent": {"every": "1h", "days": 7},
            "full": {"cron": "0 3 * * *", "days": 400},
        },
        "ledger": {"job": JOB, "summary_deadline": "6h", "no_match_rate": 0.05, "settle": "15m"},
    }


def _canary(stores: Stores) -> dict[str, Any]:
    return {
        "store": "search_sync",
        "index": stores.index,
        "write": "update",
        "document": {"review_tier": TIERS[0]},
        "marker": CANARY_MARKER,
        "cron": "0 12 * * *",
        "timeout_seconds": 30,
        "key_query": "SELECT task_id FROM tasks WHERE status = 'completed'"
        " AND conversation_id IS NOT NULL AND completed_at >= $1"
        " AND completed_at < $2 ORDER BY completed_at DESC LIMIT 1",
    }


def variant_check(name: str, stores: Stores) -> dict[str, Any]:
    """Return the config of one check by name: the full check, a variant or the seed's."""
    check = _main_check(stores)
    if name == MAIN:
        check["canary"] = _canary(stores)
        return check
    check["description"] = f"Ablation of {MAIN}: {name}."
    tol = check["tolerance"]
    if name == "raw-index":
        # Only the clause that hides canary sentinels stays: it is no reader's filter.
        check["reader"]["filter"] = {"bool": {"must_not": [HIDE_CANARY]}}
    elif name == "missing-only":
        tol["extra"] = UNLIMITED
    elif name == "distinct-only":
        check["fields"] = {}
        check["reader"]["fields"] = {}
        tol["mismatched"] = UNLIMITED
    elif name == "last-7-days":
        check["schedule"] = {"recent": {"every": "1h", "days": 7}}
    elif name == "resolvable-keys":
        del tol["exclusion_rate"]["no_document"]
    elif name == "exact-all-rows":
        del check["exclusions"]
        del check["ledger"]
        tol["exclusion_rate"] = {}
    elif name == SEED_CHECK:
        del check["ledger"]
        tol["missing_ratio"] = 0.05
        tol["exclusion_rate"] = {"no_join_key": 0.5}
        check["description"] = "The seed's check: joinable rows, 5% of them may be missing."
    else:
        raise ValueError(f"no bench check named {name!r}")
    return check


def config_dict(stores: Stores, checks: Iterable[str]) -> dict[str, Any]:
    """Return the config of one scenario's checks on its stores, as the YAML's mapping."""
    return {
        "stores": {
            "tasks_db": {
                "kind": "postgres",
                "dsn": stores.dsn,
                "timeout_seconds": 60,
                "pool_max": 2,
            },
            "search": {"kind": "opensearch", "url": OS_URL, "timeout_seconds": 60},
            # The sync job's identity: the canary writes with it.
            "search_sync": {"kind": "opensearch", "url": OS_URL, "timeout_seconds": 30},
        },
        "state": {"dsn": stores.dsn, "schema": "driftgauge"},
        "api": {"sample_keys": 20},
        "checks": {name: variant_check(name, stores) for name in checks},
    }


def config_text(stores: Stores, checks: Iterable[str]) -> str:
    """Return the YAML config of one scenario's checks on its stores."""
    return yaml.safe_dump(config_dict(stores, checks), sort_keys=False)


def load(stores: Stores, checks: Iterable[str]) -> Config:
    """Return the validated driftgauge config of one scenario."""
    return load_text(config_text(stores, checks), source="fault-bench")
