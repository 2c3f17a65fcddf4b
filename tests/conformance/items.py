"""The data set of tests/integration/dataset.py as a table any kind can store."""

from __future__ import annotations

from tests.conformance.spec import Rule, Spec, Table
from tests.integration import dataset as ds

ROWS = ds.make_rows()
ITEMS = Table(
    name="items",
    columns=(
        ("id", "key"),
        ("ts", "instant"),
        ("label", "text"),
        ("amount", "decimal"),
        ("qty", "integer"),
        ("flag", "boolean"),
        ("updated_at", "naive_ms"),
        ("tier", "text"),
    ),
    rows=[r.record() for r in ROWS],
    declared=(("label_text", "analyzed"),),
    shards=3,
    time_index="ts",
    id_column="id",
)
"""The rows in a table with a time index (in PostgreSQL) or an index of 3 shards (OpenSearch)."""
SPEC = Spec(key="id", time="ts", fields=ds.FIELDS, tz=ds.TZ.key)
"""A view of the items with the data set's fields."""
RULES = (Rule("no_label", "label", "null"), Rule("tier_c", "tier", "eq", "c"))
"""The exclusions ds.pg_reason names: label IS NULL, then tier = 'c'."""
NOT_TIER_C = Rule("not_tier_c", "tier", "ne", "c")
