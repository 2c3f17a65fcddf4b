"""The PostgreSQL store kind: adapter, dialect SQL, preflight and the driver boundary."""
