-- Verdicts that must stay visible until judged again: the written_exceeds_handed ledger rule,
-- an index to read every window a rule still breaches, and a volume day that had too little
-- history to be judged.

ALTER TABLE ledger_breaches DROP CONSTRAINT ledger_breaches_rule_check;
ALTER TABLE ledger_breaches ADD CONSTRAINT ledger_breaches_rule_check
    CHECK (rule IN ('missing_summary', 'duplicate_summary', 'failed_writes', 'nothing_written',
                    'no_match_rate', 'outcomes_mismatch', 'status_mismatch',
                    'written_exceeds_handed'));
CREATE INDEX ledger_breaches_open ON ledger_breaches (job, rule, window_day) WHERE active;

-- `anomaly` stays the band verdict of a judged day; `status` says whether it was judged.
ALTER TABLE volume_results
    ADD COLUMN history_days integer,
    ADD COLUMN status text NOT NULL DEFAULT 'ok'
        CHECK (status IN ('ok', 'anomaly', 'insufficient_history'));
UPDATE volume_results SET status = 'anomaly' WHERE anomaly;
