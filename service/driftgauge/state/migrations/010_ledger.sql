-- The run ledger: what each sync-job run was handed and where every row ended up, and the
-- breaches of the ledger rules per job window. Applied with search_path set to the schema.

CREATE TABLE ledger_runs (
    id             bigserial   PRIMARY KEY,
    job            text        NOT NULL,
    -- The job's own id for the run, so a retried "open" returns the same run.
    client_run_id  text,
    window_start   timestamptz NOT NULL,
    window_end     timestamptz NOT NULL,
    -- The day bucket (in the job's time zone) the run belongs to: the day of window_start.
    window_day     date        NOT NULL,
    input_rows     bigint      NOT NULL CHECK (input_rows >= 0),
    opened_at      timestamptz NOT NULL,
    closed_at      timestamptz,
    status         text        CHECK (status IN ('success', 'partial_failure', 'failed')),
    -- The job's summary exactly as reported (status, counts, message).
    summary        jsonb,
    CHECK (window_end > window_start)
);
CREATE UNIQUE INDEX ledger_runs_client_id ON ledger_runs (job, client_run_id)
    WHERE client_run_id IS NOT NULL;
CREATE INDEX ledger_runs_by_window ON ledger_runs (job, window_day, id);
CREATE INDEX ledger_runs_by_span ON ledger_runs (job, window_start, window_end);

-- One row per accepted batch: a retried batch (same id, same payload) is not counted again.
CREATE TABLE ledger_batches (
    run_id         bigint      NOT NULL REFERENCES ledger_runs (id) ON DELETE CASCADE,
    batch_id       text        NOT NULL,
    payload_sha256 text        NOT NULL,
    received_at    timestamptz NOT NULL,
    PRIMARY KEY (run_id, batch_id)
);

-- Rows per run, outcome and reason ('' for written; the error class for failed).
CREATE TABLE ledger_outcomes (
    run_id         bigint      NOT NULL REFERENCES ledger_runs (id) ON DELETE CASCADE,
    outcome        text        NOT NULL
                   CHECK (outcome IN ('written', 'no_match', 'skipped', 'failed')),
    reason         text        NOT NULL DEFAULT '',
    rows           bigint      NOT NULL CHECK (rows >= 0),
    PRIMARY KEY (run_id, outcome, reason)
);

-- Keys reported one by one as no_match, skipped or failed; written keys are only counted.
CREATE TABLE ledger_keys (
    id             bigserial   PRIMARY KEY,
    run_id         bigint      NOT NULL REFERENCES ledger_runs (id) ON DELETE CASCADE,
    key            text        NOT NULL,
    outcome        text        NOT NULL CHECK (outcome IN ('no_match', 'skipped', 'failed')),
    reason         text        NOT NULL,
    batch_id       text        NOT NULL
);
CREATE INDEX ledger_keys_by_run ON ledger_keys (run_id, key);

-- Job windows evaluated against the rules; the latest per job drives the breach gauges.
CREATE TABLE ledger_windows (
    job            text        NOT NULL,
    window_day     date        NOT NULL,
    due            boolean     NOT NULL,
    evaluated_at   timestamptz NOT NULL,
    PRIMARY KEY (job, window_day)
);

-- Each rule a window breached, recorded once; `active` while it still holds.
CREATE TABLE ledger_breaches (
    job            text        NOT NULL,
    window_day     date        NOT NULL,
    rule           text        NOT NULL CHECK (rule IN ('missing_summary', 'duplicate_summary',
                       'failed_writes', 'nothing_written', 'no_match_rate',
                       'outcomes_mismatch', 'status_mismatch')),
    detail         text        NOT NULL,
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL,
    active         boolean     NOT NULL,
    PRIMARY KEY (job, window_day, rule)
);
CREATE INDEX ledger_breaches_by_time ON ledger_breaches (job, first_seen DESC);
