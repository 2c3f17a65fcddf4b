"""The metric families of one scrape, declared once each and returned in declaration order."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


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
