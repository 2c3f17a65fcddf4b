"""Ledger, canary, vocabulary and volume config: defaults, and errors that name their place."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml

from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError
from driftgauge.stores.opensearch import querydsl
from driftgauge.stores.opensearch.settings import OpenSearchStore
from tests.config_fuzz import HIDE, TIERS, tier_reader


def config(**check: Any) -> str:
    base: dict[str, Any] = {
        "stores": {
            "db": {"kind": "postgres", "dsn": "postgresql://x@h/db"},
            "os": {"kind": "opensearch", "url": "http://h:9200"},
            "os_sync": {"kind": "opensearch", "url": "http://h:9200", "username": "sync"},
        },
        "state": {"dsn": "postgresql://x@h/state"},
        "checks": {
            "reviews": {
                "source": {"store": "db", "table": "tasks", "key": "task_id", "time": "ts"},
                "reader": tier_reader("ts"),
                "fields": {"label": "string"},
                **check,
            }
        },
    }
    return yaml.safe_dump(base)


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_text(text)
    return err.value.problems


def test_sections_are_optional_and_default_off() -> None:
    check = load_text(config()).checks["reviews"]
    assert (check.ledger, check.canary, check.vocabulary, check.volume) == (None, None, (), None)


def test_defaults_of_each_section() -> None:
    check = load_text(
        config(
            ledger={"job": "review-sync"},
            canary={"store": "os_sync"},
            vocabulary={"label": {}},
            volume={},
        )
    ).checks["reviews"]
    assert check.ledger is not None and check.canary is not None and check.volume is not None
    assert check.ledger.no_match_rate == 0.05
    assert check.ledger.summary_deadline == timedelta(hours=6)
    assert check.canary.index == "conv" and check.canary.cron == "0 12 * * *"
    assert isinstance(check.canary.store, OpenSearchStore)
    assert check.canary.store.username == "sync"
    assert check.vocabulary[0].accepted == ("first_tier", "second_tier")
    assert (check.volume.trailing, check.volume.sigmas) == (30, 3.0)


def test_canary_errors_name_their_location() -> None:
    got = problems(config(canary={"store": "db", "every": "often", "document": {"task_id": 1}}))
    assert (
        "checks.reviews.canary.store: the canary writes to OpenSearch; store 'db' is "
        "postgres" in got
    )
    assert any(p.startswith("checks.reviews.canary.every:") for p in got)
    assert any(p.startswith("checks.reviews.canary.document.task_id:") for p in got)


def test_a_reader_filter_that_would_show_sentinels_is_rejected() -> None:
    text = config(canary={"store": "os_sync"}).replace("driftgauge_canary", "other_marker")
    got = problems(text)
    assert len(got) == 1
    assert got[0].startswith("checks.reviews.reader.filter: must hide canary sentinels")


def test_vocabulary_needs_accepted_values_it_can_find() -> None:
    got = problems(config(vocabulary={"label": {"filter_field": "tier"}, "colour": {}}))
    assert "checks.reviews.vocabulary.colour: not one of the check's fields" in got
    assert any(
        p.startswith(
            "checks.reviews.vocabulary.label.accepted: the reader filter has "
            "no term or terms clause on 'tier'"
        )
        for p in got
    )
    explicit = load_text(config(vocabulary={"label": {"accepted": ["gold", True, 3]}}))
    assert explicit.checks["reviews"].vocabulary[0].accepted == ("3", "gold", "true")


def test_ledger_durations_and_unknown_keys() -> None:
    got = problems(
        config(ledger={"job": "review-sync", "summary_deadline": "soon", "colour": "red"})
    )
    assert "checks.reviews.ledger.colour: unknown key" in got
    got = problems(config(ledger={"job": "review-sync", "settle": "later"}))
    assert got[0].startswith("checks.reviews.ledger.settle:")


def test_checks_sharing_a_job_must_agree_on_its_windows() -> None:
    raw = yaml.safe_load(config(ledger={"job": "review-sync"}))
    other = dict(raw["checks"]["reviews"])
    other["ledger"] = {"job": "review-sync", "no_match_rate": 0.2}
    raw["checks"]["reviews_b"] = other
    got = problems(yaml.safe_dump(raw))
    assert len(got) == 1 and got[0].startswith("checks.reviews_b.ledger.job: job 'review-sync'")


def test_accepted_terms_reads_positive_clauses_only() -> None:
    flt = {
        "bool": {
            "filter": [TIERS, {"term": {"visibility": {"value": "public"}}}],
            "must_not": [{"terms": {"review_tier": ["first_tier"]}}],
        }
    }
    assert querydsl.accepted_terms(flt, "review_tier") == ("first_tier", "second_tier")
    assert querydsl.accepted_terms(flt, "visibility") == ("public",)
    assert querydsl.accepted_terms(flt, "label") is None
    both = {"bool": {"must": [TIERS, {"terms": {"review_tier": ["second_tier", "x"]}}]}}
    assert querydsl.accepted_terms({"query": both}, "review_tier") == ("second_tier",)
    either = {"bool": {"should": [{"term": {"t": "a"}}, {"term": {"t": "b"}}]}}
    assert querydsl.accepted_terms(either, "t") == ("a", "b")


def test_without_marker_clause_keeps_every_other_clause() -> None:
    flt: dict[str, Any] = {
        "bool": {"filter": [TIERS], "must_not": [HIDE, {"term": {"deleted": True}}]}
    }
    out = querydsl.without_marker_clause(flt, "driftgauge_canary")
    assert out == {"bool": {"filter": [TIERS], "must_not": [{"term": {"deleted": True}}]}}
    assert flt["bool"]["must_not"][0] == HIDE  # the original is untouched
    only = querydsl.without_marker_clause({"bool": {"must_not": HIDE}}, "driftgauge_canary")
    assert only == {"bool": {}}
    with pytest.raises(ValueError, match=r"no bool\.must_not clause"):
        querydsl.without_marker_clause(TIERS, "driftgauge_canary")


def test_an_elasticsearch_reader_gives_its_filter_terms_but_takes_no_canary() -> None:
    text = config(vocabulary={"label": {}}, canary={"store": "os_sync"})
    text = text.replace("kind: opensearch", "kind: elasticsearch")
    got = problems(text)
    # The vocabulary's accepted values come from the query DSL filter, as on OpenSearch.
    assert not any(p.startswith("checks.reviews.vocabulary") for p in got), got
    assert (
        "checks.reviews.canary.store: the canary writes to OpenSearch; store 'os_sync' is "
        "elasticsearch" in got
    )
    vocabulary = load_text(
        config(vocabulary={"label": {}}).replace("kind: opensearch", "kind: elasticsearch")
    )
    assert vocabulary.checks["reviews"].vocabulary[0].accepted == ("first_tier", "second_tier")
