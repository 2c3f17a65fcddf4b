"""Canaries: a sentinel written with the sync job's identity, read back through the reader view."""
