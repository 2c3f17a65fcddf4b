"""OpenSearch row exports ask time spans in whole milliseconds (a `date` field's unit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from driftgauge.stores.opensearch.adapter import _within, to_millis

T = datetime(2026, 3, 1, 12, 0, 0, 123_000, tzinfo=UTC)
US = timedelta(microseconds=1)
MS = timedelta(milliseconds=1)


def test_a_microsecond_span_becomes_its_millisecond() -> None:
    assert to_millis([(T, T + US)]) == [(T, T + MS)]
    assert to_millis([(T + 7 * US, T + 8 * US)]) == [(T, T + MS)]


def test_spans_in_one_millisecond_are_asked_once_and_bounds_on_one_stay() -> None:
    spans = [(T + US, T + 2 * US), (T + 5 * US, T + 6 * US), (T + 3 * MS, T + 4 * MS)]
    assert to_millis(spans) == [(T, T + MS), (T + 3 * MS, T + 4 * MS)]


def test_rows_are_held_to_the_spans_asked_for() -> None:
    spans = [(T, T + US), (T + 3 * MS, T + 4 * MS)]
    assert _within(T, spans) and _within(T + 3 * MS + 5 * US, spans)
    assert not _within(T + US, spans)  # same millisecond, not the microsecond named
    assert not _within(T - US, spans) and not _within(T + 4 * MS, spans)
