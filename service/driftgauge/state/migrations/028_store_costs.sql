-- The planner's cost constant per store, as `driftgauge calibrate` measured it: the
-- difference digests' scan of a window over the bare day scan of it (engine.cost).
-- Applied with search_path set to the schema.
CREATE TABLE store_costs (
    store        text             PRIMARY KEY,
    kind         text             NOT NULL,
    digest_pass  double precision NOT NULL CHECK (digest_pass > 0),
    rows         bigint           NOT NULL CHECK (rows >= 0),
    measured_at  timestamptz      NOT NULL
);
