"""The state database: driftgauge's own record of runs and their results."""
