-- A NULL key is a key of its own (not the key ''): its sampled rows keep key NULL.
ALTER TABLE key_samples ALTER COLUMN key DROP NOT NULL;
