"""The domain core: buckets, bounds, values and errors; no I/O, imports only core."""
