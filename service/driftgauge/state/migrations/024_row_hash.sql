-- The row hash a run's digests were computed with ('md5' or 'lookup3', docs/digest.md):
-- digests of two hashes are never compared. Runs before this column were all md5.
-- Applied with search_path set to the schema.
ALTER TABLE runs ADD COLUMN row_hash text NOT NULL DEFAULT 'md5';
