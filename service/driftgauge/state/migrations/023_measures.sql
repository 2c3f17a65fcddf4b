-- Measure totals (exact sums of a check's declared measure fields), per side, of every
-- stored day bucket and hour node: {"source": {"amount_base": "1284310.55"}, "reader": {...}},
-- decimal text so no total passes through a float. NULL: the check declares no measures.
-- Applied with search_path set to the schema.
ALTER TABLE buckets ADD COLUMN measures jsonb;
ALTER TABLE nodes ADD COLUMN measures jsonb;
