"""Volume band and vocabulary: pure judgements over counts."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from driftgauge.config.frozen import Volume
from driftgauge.signals.vocabulary import VocabularyResult, unmatched
from driftgauge.signals.volume import judge_days

START = date(2024, 3, 1)


def history(n: int = 40) -> dict[date, int]:
    """Daily distinct-key counts that wobble between 900 and 1,099, like the bench."""
    return {START + timedelta(days=i): 900 + (i * 37) % 200 for i in range(n)}


def test_a_normal_day_is_inside_the_band() -> None:
    counts = history()
    day = START + timedelta(days=35)
    (verdict,) = judge_days(counts, [day], Volume())
    assert not verdict.anomaly
    assert verdict.low < verdict.distinct_keys < verdict.high
    assert 900 <= verdict.mean <= 1099 and verdict.sd > 0


def test_an_empty_day_is_an_anomaly_and_absent_days_count_zero() -> None:
    counts = history()
    empty = START + timedelta(days=35)
    del counts[empty]
    verdicts = judge_days(counts, [empty, empty + timedelta(days=1)], Volume())
    assert [v.anomaly for v in verdicts] == [True, False]
    assert verdicts[0].distinct_keys == 0


def test_a_tripled_day_is_an_anomaly_and_sigmas_widen_the_band() -> None:
    counts = history()
    day = START + timedelta(days=35)
    counts[day] *= 3
    assert judge_days(counts, [day], Volume())[0].anomaly
    assert not judge_days(counts, [day], Volume(sigmas=100))[0].anomaly


def test_only_the_trailing_buckets_count_and_never_the_day_itself() -> None:
    counts = {START + timedelta(days=i): (1000 if i < 34 else 10) for i in range(39)}
    day = START + timedelta(days=39)
    counts[day] = 5000
    (short,) = judge_days(counts, [day], Volume(trailing=5))
    assert (short.mean, short.sd) == (10, 0) and short.anomaly
    (long,) = judge_days(counts, [day], Volume(trailing=30))
    assert long.mean == (25 * 1000 + 5 * 10) / 30


def test_unmatched_values_and_rows() -> None:
    counts: dict[str | None, int] = {
        "first_tier": 500,
        "second_tier": 100,
        "third_tier": 35,
        None: 2,
    }
    got = unmatched(counts, ["first_tier", "second_tier"])
    assert got == {"third_tier": 35, None: 2}
    now = datetime(2024, 3, 1, tzinfo=ZoneInfo("UTC")).astimezone(UTC)
    result = VocabularyResult("reviews", "label", now, now, got)
    assert (result.unmatched_values, result.unmatched_rows) == (2, 37)


def test_days_before_the_first_row_are_not_history() -> None:
    counts = {START + timedelta(days=i): 50 for i in range(3)}
    days = [START + timedelta(days=i) for i in range(3)]
    # Counting the 27 days before START as empty would flag every one of these.
    assert [v.status for v in judge_days(counts, days, Volume())] == ["insufficient_history"] * 3
    judged = judge_days(counts, days, Volume(min_history=2))
    assert [(v.status, v.history_days) for v in judged] == [
        ("insufficient_history", 0),
        ("insufficient_history", 1),
        ("ok", 2),
    ]
    assert (judged[2].mean, judged[2].sd) == (50, 0)
