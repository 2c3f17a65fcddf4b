-- Runs once when the compose PostgreSQL volume is created: driftgauge's own state
-- lives in its own database, apart from the demo source data.
CREATE DATABASE driftgauge_state OWNER driftgauge;
