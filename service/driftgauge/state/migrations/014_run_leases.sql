-- Run leases: the replica running a run renews `heartbeat_at`; a run whose lease has run
-- out is marked `error: interrupted` by any replica. Interruptions are tallied per check so
-- their counter never goes down when retention prunes the runs. Recurring jobs other than
-- ticks (canaries, signals, ledger deadlines, retention) claim each scheduled time once.
-- Applied with search_path set to the schema.

ALTER TABLE runs ADD COLUMN heartbeat_at timestamptz;
CREATE INDEX runs_running ON runs (heartbeat_at) WHERE status = 'running';

CREATE TABLE run_interruptions (
    check_name     text        PRIMARY KEY,
    n              bigint      NOT NULL CHECK (n >= 0)
);

CREATE TABLE job_claims (
    job            text        NOT NULL,
    scheduled_for  timestamptz NOT NULL,
    replica        text        NOT NULL,
    claimed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job, scheduled_for)
);
