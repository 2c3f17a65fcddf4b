-- Safe repair (seeds 002-004): watermarks, consumers and their read log, backfills from plan
-- to close, rerun probes and the breaches they raise. Applied with search_path set to the
-- schema.

-- A pipeline's processed_through: every partition at or before it is trusted.
CREATE TABLE watermarks (
    pipeline          text        PRIMARY KEY,
    processed_through timestamptz NOT NULL,
    check_name        text,
    -- No advance for this long is a `watermark_stalled` breach; NULL: never stalls.
    stall_after       interval,
    advanced_at       timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    updated_by        text        NOT NULL,
    reason            text        NOT NULL
);

-- Every move of a watermark, with who and why.
CREATE TABLE watermark_moves (
    id                bigserial   PRIMARY KEY,
    pipeline          text        NOT NULL REFERENCES watermarks (pipeline) ON DELETE CASCADE,
    moved_at          timestamptz NOT NULL,
    from_ts           timestamptz,
    to_ts             timestamptz NOT NULL,
    direction         text        NOT NULL CHECK (direction IN ('set', 'advance', 'back')),
    moved_by          text        NOT NULL,
    reason            text        NOT NULL,
    backfill_id       bigint
);
CREATE INDEX watermark_moves_by_pipeline ON watermark_moves (pipeline, moved_at DESC, id DESC);

-- Downstream reports, exports and models, and how to re-trigger each.
CREATE TABLE consumers (
    name              text        PRIMARY KEY,
    kind              text        NOT NULL CHECK (kind IN ('report', 'export', 'model', 'other')),
    owner             text        NOT NULL,
    rank              integer     NOT NULL CHECK (rank >= 1),
    webhook_url       text,
    command           text,
    signs             boolean     NOT NULL DEFAULT false,
    signed_by         text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    CHECK (webhook_url IS NOT NULL OR command IS NOT NULL),
    CHECK (NOT signs OR signed_by IS NOT NULL)
);

-- Which consumer read which partition of a check, when, and (when known) what it held then:
-- the baseline a silent change of a signed partition is judged against.
CREATE TABLE consumer_reads (
    id                bigserial   PRIMARY KEY,
    consumer          text        NOT NULL REFERENCES consumers (name) ON DELETE CASCADE,
    check_name        text        NOT NULL,
    partition_start   timestamptz NOT NULL,
    partition_end     timestamptz NOT NULL,
    read_at           timestamptz NOT NULL,
    seen              jsonb,
    backfill_id       bigint,
    CHECK (partition_end > partition_start)
);
CREATE INDEX consumer_reads_by_partition ON consumer_reads (check_name, partition_start);
CREATE INDEX consumer_reads_by_consumer ON consumer_reads (consumer, read_at DESC, id DESC);

-- One row per backfill: its lifecycle stamps and, once closed, the backfill log entry.
CREATE TABLE backfills (
    id                bigserial   PRIMARY KEY,
    check_name        text        NOT NULL,
    pipeline          text,
    status            text        NOT NULL CHECK (status IN ('planned', 'announced', 'running',
                                      'verified', 'replayed', 'closed')),
    reason            text        NOT NULL,
    first_bad         timestamptz NOT NULL,
    reset_to          timestamptz NOT NULL,
    planned_at        timestamptz NOT NULL,
    planned_by        text        NOT NULL,
    announced_at      timestamptz,
    announced_by      text,
    announcement      text,
    started_at        timestamptz,
    started_by        text,
    verified_at       timestamptz,
    replayed_at       timestamptz,
    closed_at         timestamptz,
    closed_by         text,
    totals_before     jsonb,
    totals_after      jsonb,
    diff              jsonb
);
CREATE INDEX backfills_open ON backfills (check_name) WHERE status <> 'closed';

-- The partitions a backfill repairs, with what each held before and after.
CREATE TABLE backfill_targets (
    backfill_id       bigint      NOT NULL REFERENCES backfills (id) ON DELETE CASCADE,
    partition_start   timestamptz NOT NULL,
    partition_end     timestamptz NOT NULL,
    run_id            bigint,
    before            jsonb,
    after             jsonb,
    verified          jsonb,
    PRIMARY KEY (backfill_id, partition_start)
);

-- The consumers that read a backfill's targets, as planned, in rank order.
CREATE TABLE backfill_consumers (
    backfill_id       bigint      NOT NULL REFERENCES backfills (id) ON DELETE CASCADE,
    consumer          text        NOT NULL,
    rank              integer     NOT NULL,
    signs             boolean     NOT NULL,
    PRIMARY KEY (backfill_id, consumer)
);

-- Each re-trigger of a consumer during replay.
CREATE TABLE backfill_replays (
    backfill_id       bigint      NOT NULL REFERENCES backfills (id) ON DELETE CASCADE,
    consumer          text        NOT NULL,
    rank              integer     NOT NULL,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    outcome           text        NOT NULL CHECK (outcome IN ('running', 'finished', 'failed')),
    detail            text        NOT NULL DEFAULT '',
    PRIMARY KEY (backfill_id, consumer)
);

-- Ledger runs the recompute reported under the backfill id.
CREATE TABLE backfill_runs (
    backfill_id       bigint      NOT NULL REFERENCES backfills (id) ON DELETE CASCADE,
    ledger_run_id     bigint      NOT NULL,
    attached_at       timestamptz NOT NULL,
    PRIMARY KEY (backfill_id, ledger_run_id)
);

-- Every step taken, refused or delivered (webhooks), in order.
CREATE TABLE backfill_events (
    id                bigserial   PRIMARY KEY,
    backfill_id       bigint,
    check_name        text        NOT NULL,
    at                timestamptz NOT NULL,
    step              text        NOT NULL,
    outcome           text        NOT NULL CHECK (outcome IN ('done', 'refused', 'delivered',
                                      'undelivered')),
    rule              text        NOT NULL DEFAULT '',
    actor             text        NOT NULL DEFAULT '',
    consumer          text,
    detail            text        NOT NULL DEFAULT ''
);
CREATE INDEX backfill_events_by_backfill ON backfill_events (backfill_id, id);
CREATE INDEX backfill_events_refused ON backfill_events (step, rule) WHERE outcome = 'refused';

-- Rerun probes: a partition after run 1 and after run 2 of one step or ledger window.
CREATE TABLE probe_results (
    id                bigserial   PRIMARY KEY,
    check_name        text        NOT NULL,
    mode              text        NOT NULL CHECK (mode IN ('step', 'ledger')),
    subject           text        NOT NULL,
    partition_start   timestamptz NOT NULL,
    partition_end     timestamptz NOT NULL,
    run1              jsonb       NOT NULL,
    run2              jsonb       NOT NULL,
    verdict           text        NOT NULL CHECK (verdict IN ('converged', 'appended',
                                      'changed')),
    appended          bigint      NOT NULL DEFAULT 0,
    probed_at         timestamptz NOT NULL
);
CREATE INDEX probe_results_by_check ON probe_results (check_name, probed_at DESC, id DESC);

-- Repair breaches, one row per kind and subject; `active` while it still holds.
CREATE TABLE repair_breaches (
    kind              text        NOT NULL CHECK (kind IN ('watermark_moved_back',
                                      'watermark_stalled', 'silent_change', 'rerun_appended')),
    subject           text        NOT NULL,
    detail            text        NOT NULL,
    facts             jsonb       NOT NULL DEFAULT '{}',
    first_seen        timestamptz NOT NULL,
    last_seen         timestamptz NOT NULL,
    active            boolean     NOT NULL,
    PRIMARY KEY (kind, subject)
);
