"""The DuckDB store kind: a database file or Parquet/CSV files, embedded, queried in threads."""
