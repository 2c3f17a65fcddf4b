-- The hours of a day judged from its difference digests (it has no hour nodes) that hold a
-- differing row, as UTC hour starts: what a backfill plan names instead of the whole day.
-- Applied with search_path set to the schema.
ALTER TABLE buckets ADD COLUMN drift_hours timestamptz[] NOT NULL DEFAULT '{}';
