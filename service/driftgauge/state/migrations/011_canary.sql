-- Canary results: a sentinel written with the sync job's identity and read back through
-- the reader view. One row per attempt.

CREATE TABLE canary_results (
    id               bigserial   PRIMARY KEY,
    check_name       text        NOT NULL,
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    result           text        NOT NULL
                     CHECK (result IN ('ok', 'permission', 'not_visible', 'timeout', 'error')),
    duration_seconds double precision NOT NULL,
    -- The real source key the sentinel carried (never exported as a label).
    key              text,
    detail           text        NOT NULL DEFAULT ''
);
CREATE INDEX canary_results_by_check ON canary_results (check_name, finished_at DESC, id DESC);
