"""The JSON `driftgauge check --json` prints: everything the text table says, for scripts."""

from __future__ import annotations

from typing import Any

from driftgauge.engine.result import BucketResult, RunResult

TOTALLED = ("expected", "visible", "missing", "extra", "mismatched", "duplicates")


def _bucket(b: BucketResult, composite: bool) -> dict[str, Any]:
    return {
        **b.to_dict(),
        "samples": [k.payload(composite).model_dump() for k in b.samples],
        "ledger_excluded": dict(b.ledger_excluded),
    }


def run_report(result: RunResult, *, composite: bool = False) -> dict[str, Any]:
    """Return the run with its id, its buckets' sample keys, totals and why it ended so."""
    judged = [b for b in result.buckets if b.status != "settling"]
    totals: dict[str, Any] = {c: sum(getattr(b, c) for b in judged) for c in TOTALLED}
    totals["excluded"] = sum(b.excluded_total for b in judged)
    counts = {
        s: sum(b.status == s for b in result.buckets) for s in ("ok", "drift", "settling", "error")
    }
    return {
        **result.to_dict(),
        "run_id": result.run_id,
        "failed_store": result.failed_store,
        # Settling buckets are left out of the totals, as the text table does.
        "totals": totals,
        "bucket_statuses": counts,
        "buckets": [_bucket(b, composite) for b in result.buckets],
    }
