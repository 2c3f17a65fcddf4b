-- How each day was judged (day aggregates, the first pass's digests, a scan of the day
-- alone, slots, or a drill-down) and why: the planner's choice, shown by the API.
-- NULL for buckets recorded before it was kept. Applied with search_path set to the schema.
ALTER TABLE buckets
    ADD COLUMN strategy        text,
    ADD COLUMN strategy_reason text;
