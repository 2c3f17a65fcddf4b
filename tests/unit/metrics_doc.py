"""docs/metrics.md as the metrics tests read it: its table rows, and an exposition to match."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
# Name, type and the labels cell; a cell may be empty and unpadded ("| |").
ROW = re.compile(r"\| `(driftgauge_\w+)` \| (\w+) \|([^|]*)\|")


def documented_rows(sections: Collection[str]) -> list[tuple[str, str, str]]:
    """Return (name, type, labels cell) of each metric row under the `## ` sections named."""
    rows = []
    current = ""
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
        m = ROW.match(line)
        if m and current in sections:
            rows.append((m.group(1), m.group(2), m.group(3)))
    return rows


def ticked(text: str) -> list[str]:
    """Return the `backticked` words of `text`, in order."""
    return re.findall(r"`(\w+)`", text)


def labels_and_values(cell: str) -> tuple[set[str], set[str]]:
    """Return a labels cell's label names and, apart, the values listed in its parentheses."""
    names = set(ticked(re.sub(r"\([^)]*\)", "", cell)))
    values = set(ticked(" ".join(re.findall(r"\(([^)]*)\)", cell))))
    return names, values


def exposed(text: str) -> dict[str, tuple[str, set[str]]]:
    """Return each family of the exposition `text` by its documented name: type and label names."""
    seen = {}
    for fam in text_string_to_metric_families(text):
        # The parser drops a counter's `_total`; the docs name the counter by its sample.
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        seen[name] = (fam.type, set().union(*(set(s.labels) for s in fam.samples)))
    return seen
