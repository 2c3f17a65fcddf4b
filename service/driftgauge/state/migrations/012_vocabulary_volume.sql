-- Vocabulary and volume results: the latest verdict per check and field, and per check and
-- day bucket. Each computation replaces the previous one for the same rows.

CREATE TABLE vocabulary_results (
    check_name       text        NOT NULL,
    field            text        NOT NULL,
    computed_at      timestamptz NOT NULL,
    window_start     timestamptz NOT NULL,
    window_end       timestamptz NOT NULL,
    unmatched_values integer     NOT NULL,
    unmatched_rows   bigint      NOT NULL,
    -- Up to 100 unmatched values with their row counts: {"value": rows}.
    sample           jsonb       NOT NULL DEFAULT '{}',
    PRIMARY KEY (check_name, field)
);

CREATE TABLE volume_results (
    check_name       text        NOT NULL,
    day              date        NOT NULL,
    computed_at      timestamptz NOT NULL,
    distinct_keys    bigint      NOT NULL,
    mean             double precision NOT NULL,
    sd               double precision NOT NULL,
    low              double precision NOT NULL,
    high             double precision NOT NULL,
    anomaly          boolean     NOT NULL,
    PRIMARY KEY (check_name, day)
);
CREATE INDEX volume_results_latest ON volume_results (check_name, computed_at DESC);
