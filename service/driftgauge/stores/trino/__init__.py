"""The trino store kind: digests pushed down to a Trino cluster over its HTTP protocol."""
