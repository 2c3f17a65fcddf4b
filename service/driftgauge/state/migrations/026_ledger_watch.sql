-- When the ledger began watching each sync job: a window that ended before then and holds
-- no run proves nothing (the job may have reported before the ledger existed), so it does
-- not breach missing_summary. A breach can also be acknowledged (who, why, when): it then
-- leaves the open breaches and is not raised again for that window.
-- Applied with search_path set to the schema.
CREATE TABLE ledger_jobs (
    job            text        PRIMARY KEY,
    watched_since  timestamptz NOT NULL
);
-- Jobs judged before this table: the earliest of their first run and their first breach.
INSERT INTO ledger_jobs (job, watched_since)
SELECT job, min(t) FROM (
    SELECT job, min(opened_at) AS t FROM ledger_runs GROUP BY job
    UNION ALL
    SELECT job, min(first_seen) FROM ledger_breaches GROUP BY job
) seen GROUP BY job;

ALTER TABLE ledger_breaches
    ADD COLUMN acknowledged_at     timestamptz,
    ADD COLUMN acknowledged_by     text,
    ADD COLUMN acknowledged_reason text,
    ADD CHECK ((acknowledged_at IS NULL) = (acknowledged_by IS NULL)
               AND (acknowledged_at IS NULL) = (acknowledged_reason IS NULL));
