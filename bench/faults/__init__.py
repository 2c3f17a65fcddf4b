"""The fault bench: the seed's nine silent faults, on a real PostgreSQL and a real OpenSearch.

A sync job copies review labels from a task store (the source) onto conversation
documents in a search index (the reader view is the dashboard's filtered query). Forty
simulated days run under a clock the bench controls; one fault switches on at the start
of day 20, and six detectors (three classic alarms, driftgauge's canary, ledger and
reconciliation) are scored by how many hours they take to raise an alarm.
"""
