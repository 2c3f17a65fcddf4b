"""The metric families of one scrape: declared as data, made by one function, returned in order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

Family = GaugeMetricFamily | CounterMetricFamily


@dataclass(frozen=True)
class Spec:
    """One family as docs/metrics.md lists it (a counter's name without `_total`)."""

    name: str
    doc: str
    labels: tuple[str, ...]
    kind: Literal["gauge", "counter"] = "gauge"


def build(specs: Mapping[str, Spec]) -> dict[str, Family]:
    """Return a new, empty family for each spec, keyed and ordered as the table is."""
    made: dict[str, Family] = {}
    for key, s in specs.items():
        make = CounterMetricFamily if s.kind == "counter" else GaugeMetricFamily
        made[key] = make(s.name, s.doc, labels=list(s.labels))
    return made


class Families:
    """Make a scrape's families and remember them, so none is declared but left unreturned."""

    def __init__(self) -> None:
        self._made: list[Metric] = []

    def gauge(self, name: str, doc: str, *labels: str) -> GaugeMetricFamily:
        """Return a new gauge family labelled `labels`, kept for `all`."""
        fam = GaugeMetricFamily(name, doc, labels=list(labels))
        self._made.append(fam)
        return fam

    def counter(self, name: str, doc: str, *labels: str) -> CounterMetricFamily:
        """Return a new counter family (`name` without `_total`), kept for `all`."""
        fam = CounterMetricFamily(name, doc, labels=list(labels))
        self._made.append(fam)
        return fam

    def all(self) -> list[Metric]:
        """Return every family made so far, empty ones too (they print only HELP and TYPE)."""
        return list(self._made)
