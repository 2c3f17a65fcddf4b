-- Rows deleted by retention, tallied per counter series, so that the counters on /metrics
-- (runs, ledger runs, breaches, canary attempts) never go down when old rows are pruned.
-- Applied with search_path set to the schema.

CREATE TABLE pruned_counts (
    series         text        NOT NULL
                   CHECK (series IN ('check_runs', 'ledger_runs', 'ledger_breaches',
                                     'canary_runs')),
    -- The check or sync job the deleted rows belonged to.
    name           text        NOT NULL,
    -- The counter's other label: run status, breach rule or canary result.
    label          text        NOT NULL,
    n              bigint      NOT NULL CHECK (n >= 0),
    PRIMARY KEY (series, name, label)
);
