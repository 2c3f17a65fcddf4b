-- A run that judged no bucket (all settling, or none in its window) says so.
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('running', 'ok', 'drift', 'error', 'nothing_judged'));
