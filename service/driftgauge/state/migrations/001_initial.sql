-- Runs, their day buckets, the drill-down tree and a bounded sample of differing keys.
-- Applied with search_path set to the configured schema, so names are unqualified.

CREATE TABLE runs (
    id               bigserial PRIMARY KEY,
    check_name       text        NOT NULL,
    trigger          text        NOT NULL,
    window_start     timestamptz NOT NULL,
    window_end       timestamptz NOT NULL,
    scheduled_for    timestamptz,
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz,
    status           text        NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'ok', 'drift', 'error')),
    complete         boolean     NOT NULL DEFAULT false,
    error            text,
    duration_seconds double precision,
    queries          integer     NOT NULL DEFAULT 0,
    rows_fetched     bigint      NOT NULL DEFAULT 0,
    replica          text        NOT NULL
);

-- One run per scheduled tick across every replica sharing this database.
CREATE UNIQUE INDEX runs_one_per_tick ON runs (check_name, trigger, scheduled_for)
    WHERE scheduled_for IS NOT NULL;
CREATE INDEX runs_by_check ON runs (check_name, started_at DESC, id DESC);
CREATE INDEX runs_finished_by_check ON runs (check_name, finished_at DESC, id DESC)
    WHERE finished_at IS NOT NULL;

CREATE TABLE buckets (
    run_id           bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    day              date        NOT NULL,
    start_at         timestamptz NOT NULL,
    status           text        NOT NULL CHECK (status IN ('ok', 'drift', 'settling', 'error')),
    expected         bigint      NOT NULL,
    visible          bigint      NOT NULL,
    excluded         jsonb       NOT NULL DEFAULT '{}',
    ledger_excluded  jsonb       NOT NULL DEFAULT '{}',
    missing          bigint      NOT NULL,
    extra            bigint      NOT NULL,
    mismatched       bigint      NOT NULL,
    duplicates       bigint      NOT NULL,
    -- Digests are unsigned 64-bit: numeric(20,0), never bigint.
    source_count     bigint      NOT NULL,
    source_distinct  bigint      NOT NULL,
    source_digest    numeric(20, 0) NOT NULL,
    reader_count     bigint      NOT NULL,
    reader_distinct  bigint      NOT NULL,
    reader_digest    numeric(20, 0) NOT NULL,
    reasons          jsonb       NOT NULL DEFAULT '[]',
    PRIMARY KEY (run_id, day)
);
CREATE INDEX buckets_by_day ON buckets (day, run_id);

CREATE TABLE nodes (
    run_id           bigint      NOT NULL,
    day              date        NOT NULL,
    seq              integer     NOT NULL,
    parent_seq       integer,
    level            text        NOT NULL CHECK (level IN ('hour', 'prefix')),
    label            text        NOT NULL,
    -- The hour this node sits under (its own start for an hour node); NULL for prefixes
    -- split over a whole day.
    hour_start       timestamptz,
    fetched          boolean     NOT NULL,
    source_count     bigint      NOT NULL,
    source_distinct  bigint      NOT NULL,
    source_digest    numeric(20, 0) NOT NULL,
    reader_count     bigint      NOT NULL,
    reader_distinct  bigint      NOT NULL,
    reader_digest    numeric(20, 0) NOT NULL,
    PRIMARY KEY (run_id, day, seq),
    FOREIGN KEY (run_id, day) REFERENCES buckets (run_id, day) ON DELETE CASCADE
);
CREATE INDEX nodes_by_hour ON nodes (run_id, day, hour_start);

CREATE TABLE key_samples (
    run_id           bigint      NOT NULL,
    day              date        NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('missing', 'extra', 'mismatched')),
    key              text        NOT NULL,
    key_hash         text,
    source_copies    integer     NOT NULL,
    reader_copies    integer     NOT NULL,
    event_time       timestamptz,
    FOREIGN KEY (run_id, day) REFERENCES buckets (run_id, day) ON DELETE CASCADE
);
CREATE INDEX key_samples_by_bucket ON key_samples (run_id, day, kind, key);
