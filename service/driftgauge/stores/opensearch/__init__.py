"""The OpenSearch store kind: adapter, request bodies, retries, query DSL and preflight."""
