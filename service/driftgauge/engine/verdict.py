"""Turn a bucket's counts into a status, judged against the check's tolerances."""

from __future__ import annotations

from driftgauge.config.frozen import Tolerance
from driftgauge.core.aggregate import measures_differ
from driftgauge.engine.result import BucketResult


def judge(bucket: BucketResult, tol: Tolerance) -> None:
    """Set `bucket.status` and `bucket.reasons` from its counts (settling is decided before)."""
    reasons = []
    should_see = max(bucket.expected - bucket.excluded_total, 0)
    if bucket.missing:
        ratio = bucket.missing / max(should_see, 1)
        if ratio > tol.missing_ratio:
            reasons.append(
                f"missing {bucket.missing} of {should_see} ({ratio:.2%} > {tol.missing_ratio:.2%})"
            )
    if bucket.extra > tol.extra:
        reasons.append(f"extra {bucket.extra} > {tol.extra}")
    if bucket.mismatched > tol.mismatched:
        reasons.append(f"mismatched {bucket.mismatched} > {tol.mismatched}")
    for reason, n in sorted(bucket.excluded.items()):
        limit = tol.exclusion_limit(reason)
        rate = n / max(bucket.expected, 1)
        if limit is not None and rate > limit:
            reasons.append(
                f"excluded[{reason}] {n} of {bucket.expected} ({rate:.2%} > {limit:.2%})"
            )
    # No tolerance covers a total: a signed number that moved is drift, whatever the rows.
    for name in measures_differ(bucket.source, bucket.reader):
        src = bucket.source.measures or {}
        rdr = bucket.reader.measures or {}
        reasons.append(
            f"measure[{name}] total {src.get(name, 0):f} in the source, "
            f"{rdr.get(name, 0):f} in the reader"
        )
    bucket.reasons = reasons
    bucket.status = "drift" if reasons else "ok"
