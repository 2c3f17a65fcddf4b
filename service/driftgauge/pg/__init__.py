"""The project's own PostgreSQL layer: driver errors mapped to ours, calls, pools."""
